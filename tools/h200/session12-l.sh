#!/usr/bin/env bash
# Session 12, call l, on nvidia-h200 (2026-12-01): the half tail only where it pays (the working tree:
# session12-l-ha.patch on 5959f7a's kernel): the tiles past the last whole round go as 8-row halves, one to a block,
# only where they are at most half a round (in7168_out7168_bf16's 52 of 132; not the anchor's 96 or
# in4096_out4096's 124, which keep whole tiles). GPU tests of the fp4 mma genomes, memcheck, racecheck; beside the
# kernel without it (head: the patch reversed), 2 (l1) and 3 stages (l2).
#   bash tools/h200/session12-l.sh
CALL=l SESSION=session12 CHECKS=1 VARIANTS="head=-session12-l-ha.patch" exec bash tools/h200/tma_session_check.sh
