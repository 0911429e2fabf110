#!/usr/bin/env bash
# Session 15, call a, on nvidia-h200 (2026-12-01), on 2e8f7d4's kernel: blocks out of step at no block's cost, by a
# partial item. Where the tiles do not split evenly over the blocks (the anchor: 1152 tiles, 8 whole rounds of 132
# and 1536 rows past them), every block takes the 8 whole rounds and some of the 1536 rows as one partial item
# (rows past it stale in the stage, not written), so no block is light and the light blocks' late start is off:
#   pfg: the partial item first, graded over the blocks (16 rows down to 7): a block with fewer rows is ahead by them
#        from its first item on, so the blocks land out of step and, the memory shared, end together;
#   pfe: first, even (11 or 12 rows a block); pfb: first, 16 rows for 60 blocks and 8 for 72 (call k's ds, half an
#        item out of step, without its late blocks); plg: graded, the partial item last.
# Beside the working tree's kernel; timelines of the tree, pfg and pfe.
#   bash tools/h200/session15-a.sh
CALL=a SESSION=session15 CHECKS=0 \
  VARIANTS="pfg=session15-a-pfg.patch pfe=session15-a-pfe.patch pfb=session15-a-pfb.patch plg=session15-a-plg.patch" \
  TIMELINES="tree:1 pfg:1 pfe:1" exec bash tools/h200/tma_session_check.sh
