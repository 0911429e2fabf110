#!/usr/bin/env bash
# Session 10, call d, on nvidia-h200 (2026-12-01): 14 consumer warps on a 16-row tile (4 of its 56 four-block groups
# each at in=7168, against 7 with 8 warps), 2 and 3 stages: tools/h200/session10-d-w14.patch lets the kernel build
# with warps=14 (a timing variant: the warps knob has no 14), session10-d-w14unroll2.patch keeps the group loop
# unrolled by 2 there; beside the working tree's kernel (8 warps, 2 stages); timelines at the anchor.
#   bash tools/h200/session10-d.sh
CALL=d SESSION=session10 CHECKS=0 VARIANTS="w14=session10-d-w14.patch w14u=session10-d-w14.patch,session10-d-w14unroll2.patch" \
  TIMELINES="tree:1 w14:1:14 w14u:1:14 w14u:2:14" exec bash tools/h200/tma_session_check.sh
