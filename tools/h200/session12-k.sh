#!/usr/bin/env bash
# Session 12, call k, on nvidia-h200 (2026-12-01): the half tail (the working tree: 7da6e88's kernel with
# session12-k-ht.patch): with 16-row tiles of whole rows, whole tiles while every block has one, the rest as 8-row
# halves round-robin (each block's last items; a half's consumers run rows g only), so that a block's last item is
# computed in about half the 1.45 µs after it lands. GPU tests of the fp4 mma genomes, memcheck, racecheck; beside
# 7da6e88's kernel (head: the patch reversed) with 2 (k1) and 3 stages (k2); the copy ceiling alternating with it.
#   bash tools/h200/session12-k.sh
CALL=k SESSION=session12 CHECKS=1 VARIANTS="head=-session12-k-ht.patch" CEIL="tree:1" \
  exec bash tools/h200/tma_session_check.sh
