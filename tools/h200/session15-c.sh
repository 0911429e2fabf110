#!/usr/bin/env bash
# Session 15, call c, on nvidia-h200 (2026-12-01), on 2e8f7d4's kernel: fewer, larger bulk copies. The timelines put
# 0.6 µs between item 0's first copy and the end of its 16 (one a row; the copy engine takes about 35 ns a copy
# whatever its size, session 12 call c). rpc (session15-c-rpc.patch): rows that follow each other in global memory
# go as one copy of TRPC rows, the copies 16 bytes apart in the stage, with TRPC the most rows (16, 8, 4, 2) that
# keep a fragment's 8 rows on 8 different bank quads: 4 at in=7168 (4 copies an item), 1 at in=4096 (unchanged).
# 2 and 3 stages against the working tree's 2 stages; the tree's 3 stages for the comparison.
#   bash tools/h200/session15-c.sh
CALL=c SESSION=session15 CHECKS=0 VARIANTS="rpc=session15-c-rpc.patch" TIMELINES="tree:1 rpc:1 rpc:2" \
  exec bash tools/h200/tma_session_check.sh
