#!/usr/bin/env bash
# Session 13, call f, on nvidia-h200 (2026-12-01): the recorded sweep's tma genomes measured again with the kept
# kernel (call c's first fill; calls c and e checked it: GPU tests, memcheck, racecheck) (f.tgz), then an fp4_matvec
# campaign on the H200, 2.5 minutes, as session 11's call h/i (g.tgz; sanitizer off for the campaign's time).
#   bash tools/h200/session13-f.sh
set -u
CALL=f SESSION=session13 CHECKS=0 SWEEP=1 bash tools/h200/tma_session_check.sh
bash tools/h200/fp4_campaign.sh g
