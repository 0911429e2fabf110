#!/usr/bin/env bash
# Session 10, call b, on nvidia-h200 (2026-12-01): the dynamic schedule (tools/h200/session10-b-dyn.patch: a block's
# first tile is its index, the rest claimed one at a time from a counter) with 2 and 3 stages, beside the working
# tree's kernel (c0fb6a1's, with 48 more bytes of shared memory for the schedule in family.py); racecheck of dyn at
# in7168_out7168_bf16; timelines at the anchor.
#   bash tools/h200/session10-b.sh
CALL=b SESSION=session10 CHECKS=0 RACE="dyn" VARIANTS="dyn=session10-b-dyn.patch" \
  TIMELINES="tree:1 dyn:1 tree:2 dyn:2" exec bash tools/h200/tma_session_check.sh
