#!/usr/bin/env bash
# Session 14, call a, on nvidia-h200 (2026-12-01): the blocks with a tile less than the others (at the anchor 36 of
# 132 blocks do 8 tiles, 96 do 9) start their copies later, so that the busy blocks have the memory to themselves
# meanwhile (the kernel is memory-bound; the light blocks otherwise idle for the last tile). The delay is
# n_heavy / blocks x an item's bytes x C cycles a KB, C = 29, 58 (about an item's time at the anchor's rate), 87, 116
# (session14-a-ld{05,10,15,20}.patch, timing only where they start). Beside the working tree's kernel; timelines.
#   bash tools/h200/session14-a.sh
CALL=a SESSION=session14 CHECKS=0 \
  VARIANTS="ld05=session14-a-ld05.patch ld10=session14-a-ld10.patch ld15=session14-a-ld15.patch ld20=session14-a-ld20.patch" \
  TIMELINES="tree:1 ld10:1 ld20:1" exec bash tools/h200/tma_session_check.sh
