#!/usr/bin/env bash
# Session 10, call k, on nvidia-h200 (2026-12-01): items of 8 rows (tools/h200/session10-k-half.patch: a 16-row
# tile's halves are two items in stages of 8 rows, twice the stages in the same ring; family.py of the call with the
# extra mbarriers' 16 bytes a stage) beside the working tree's kernel (075c8ae's); a timeline at the anchor.
#   bash tools/h200/session10-k.sh
CALL=k SESSION=session10 CHECKS=0 VARIANTS="half=session10-k-half.patch" TIMELINES="half:1" \
  exec bash tools/h200/tma_session_check.sh
