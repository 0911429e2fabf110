#!/usr/bin/env bash
# Session 10, call i, on nvidia-h200 (2026-12-01): the recorded sweep's tma genomes measured again (call g's sweep
# timed the kept kernel slower than session 9's while call h's probes, in the sweep's setting, timed it faster), then
# an fp4_matvec campaign on the H200 with the kept kernel, 2.5 minutes, as session 8's call j (sanitizer off for the
# campaign's time: call g ran memcheck and racecheck of this kernel).
#   bash tools/h200/session10-i.sh
set -u
CALL=i SESSION=session10 CHECKS=0 SWEEP=1 bash tools/h200/tma_session_check.sh
bash tools/h200/fp4_campaign.sh j
