#!/usr/bin/env bash
# Session 13, call m, on nvidia-h200 (2026-12-01): 3 stages whose items' row halves go out at different times
# (session13-m-p3.patch: rows 0-7 of item j once item j - 3 is released, rows 8-15 once item j - 2 is; about 1.5
# items in flight while one is computed; the consumers unchanged), beside the working tree's 2-stage genome, with the
# tree's 3-stage genome for reference. Timelines.
#   bash tools/h200/session13-m.sh
CALL=m SESSION=session13 CHECKS=0 VARIANTS="p3=session13-m-p3.patch" TIMELINES="tree:1 tree:2 p3:2" \
  exec bash tools/h200/tma_session_check.sh
