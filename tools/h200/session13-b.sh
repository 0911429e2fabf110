#!/usr/bin/env bash
# Session 13, call b, on nvidia-h200 (2026-12-01): after call a (the dynamic schedule lost to its claims' atomics,
# about 2 µs each under the copies' load; consumers spinning 0.94 µs an item moved 4.7 TB/s in the middle with
# 11-12 MB in flight, against 4.4 with the kernel's 8-9 MB), all with call a's first fill (item 1 at item 0's landing
# or 2700 cycles after its copies): d2 the claims two tiles ahead (session13-b-d2.patch); 3 stages as they are (s3);
# 3 stages with item k + 2 asked for 1300 (h13) or 700 (h7) cycles after item k has landed; d2 and h13 together
# (d2h13); beside the working tree's kernel (16 rows x 8 warps, 2 stages). Timelines.
#   bash tools/h200/session13-b.sh
CALL=b SESSION=session13 CHECKS=0 \
  VARIANTS="d2=session13-b-d2.patch s3=session13-b-s3.patch h13=session13-b-h13.patch h7=session13-b-h7.patch d2h13=session13-b-d2h13.patch" \
  TIMELINES="tree:1 d2:1 s3:2 h13:2 d2h13:2" exec bash tools/h200/tma_session_check.sh
