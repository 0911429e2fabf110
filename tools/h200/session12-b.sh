#!/usr/bin/env bash
# Session 12, call b, on nvidia-h200 (2026-12-01): fine items. The whole-row ring's 122 KB as 13 stages of one
# 4-block group a consumer warp (32 blocks of K, 544 bytes a row, 8.7 KB an item; 7 steps a 16-row tile), the
# consumers following them step by step, so that a block's first bytes land sooner and its last item is one group,
# not seven (session11-g's timeline: 1.45 µs of compute after the last landing). fine (session12-b-fine.patch): x's
# B in registers (the chains tied to each step's release: ptxas had sunk them and spilled, 96 registers now);
# fines (session12-b-fines.patch): x's B from shared memory (64 registers). Beside the working tree's kernel (b1).
#   bash tools/h200/session12-b.sh
CALL=b SESSION=session12 CHECKS=0 VARIANTS="fine=session12-b-fine.patch fines=session12-b-fines.patch" \
  exec bash tools/h200/tma_session_check.sh
