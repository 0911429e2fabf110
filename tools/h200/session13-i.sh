#!/usr/bin/env bash
# Session 13, call i, on nvidia-h200 (2026-12-01): the dynamic schedule again (session13-i-d2.patch on the working
# tree's kernel): the SASS of calls a and b showed each claim's atomic followed at once by a shuffle of its result
# (NVCC and ptxas aggregate atomicAdd and atom.add across the warp), so the producer waited about 2 µs for every
# claim; here atom.inc (not aggregated), two tiles ahead, each parity of tiles in its own register (a lambda of the
# parity: a select of the two registers waited for both claims). Beside the working tree's kernel; timelines;
# racecheck at in7168_out7168_bf16.
#   bash tools/h200/session13-i.sh
CALL=i SESSION=session13 CHECKS=0 VARIANTS="d2=session13-i-d2.patch" TIMELINES="tree:1 d2:1" RACE="d2" \
  exec bash tools/h200/tma_session_check.sh
