#!/usr/bin/env bash
# Session 11, call h, on nvidia-h200 (2026-12-01): the recorded sweep's tma genomes measured again with the kept
# kernel (the slot address before the wait, call g) and the harness's new copy ceiling (h.tgz), then an fp4_matvec
# campaign on the H200, 2.5 minutes, as session 10's call i/j (i.tgz; sanitizer off for the campaign's time: call g
# ran memcheck and racecheck of this kernel).
#   bash tools/h200/session11-h.sh
set -u
CALL=h SESSION=session11 CHECKS=0 SWEEP=1 bash tools/h200/tma_session_check.sh
bash tools/h200/fp4_campaign.sh i
