#!/usr/bin/env bash
# Session 13, call c, on nvidia-h200 (2026-12-01): the working tree's kernel with the first fill where a block has
# 6 items or more and 2 stages (session13-c-ff.patch on ca7e698's kernel: item 1 at item 0's landing or 2700 cycles
# after its copies), beside the kernel without it (head, the patch reversed; c1); beside it (c2): the gap 2000 or
# 3200 cycles, the E8M0 scale by a shift (sh: not exact for the bytes 0 and 255, how much it would give on top), and
# a timing variant without y's stores (noy: what the kernel's end and the launch gap owe them). Timelines.
#   bash tools/h200/session13-c.sh
CALL=c SESSION=session13 CHECKS=0 \
  VARIANTS="head=-session13-c-ff.patch g2000=session13-c-g2000.patch g3200=session13-c-g3200.patch sh=session13-c-sh.patch noy=session13-c-noy.patch" \
  TIMELINES="tree:1 head:1 noy:1" exec bash tools/h200/tma_session_check.sh
