#!/usr/bin/env bash
# Session 14, call g, on nvidia-h200 (2026-12-01): the kept kernel (the light blocks' late start, calls a-e, checked in
# call e; the first fill's gap 2200 cycles, call f): the recorded sweep's tma genomes measured again (g.tgz), the
# kernel alternating with 6 copy-ceiling measurements in one process (ceiling-tree-u1), then an fp4_matvec campaign
# on the H200, 2.5 minutes (h.tgz; sanitizer off for the campaign's time).
#   bash tools/h200/session14-g.sh
set -u
CALL=g SESSION=session14 CHECKS=0 SWEEP=1 CEIL="tree:1" bash tools/h200/tma_session_check.sh
bash tools/h200/fp4_campaign.sh h
