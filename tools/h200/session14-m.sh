#!/usr/bin/env bash
# Session 14, call m, on nvidia-h200 (2026-12-01), on 670a5c9's kernel: blocks out of step at no block's cost (call
# k's ds put them out of step by a late start and moved the memory at 4.44 TB/s, but its late blocks ended last).
# sh (session14-m-sh.patch): every other heavy block takes its tiles' rows shifted by half a tile (items are any 16
# rows, a copy a row): a half item first and last, so its items land half an item out of step with the others'.
# Beside the working tree's kernel; timelines of both.
#   bash tools/h200/session14-m.sh
CALL=m SESSION=session14 CHECKS=0 VARIANTS="sh=session14-m-sh.patch" TIMELINES="tree:1 sh:1" \
  exec bash tools/h200/tma_session_check.sh
