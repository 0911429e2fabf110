#!/usr/bin/env bash
# Session 13, call e, on nvidia-h200 (2026-12-01): the working tree's kernel (call c's first fill where a block has
# 6 items or more and 2 stages): GPU tests of the fp4 mma genomes, memcheck of three tma genomes, racecheck; and y's
# stores as st.global.cs (ycs) or st.global.wt (ywt) beside it (call c: without y's stores the kernel took 1.010x
# less time).
#   bash tools/h200/session13-e.sh
CALL=e SESSION=session13 CHECKS=1 VARIANTS="ycs=session13-e-ycs.patch ywt=session13-e-ywt.patch" \
  exec bash tools/h200/tma_session_check.sh
