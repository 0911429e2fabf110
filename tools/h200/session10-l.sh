#!/usr/bin/env bash
# Session 10, call l, on nvidia-h200 (2026-12-01): an item's row halves landing and released one after the other
# (tools/h200/session10-l-rowhalves.patch: the consumers take every group's rows 0-7, release them, then rows 8-15;
# family.py of the call with 16 more bytes of mbarriers a stage) beside the working tree's kernel (669dc28's); a
# timeline at the anchor.
#   bash tools/h200/session10-l.sh
CALL=l SESSION=session10 CHECKS=0 VARIANTS="rh=session10-l-rowhalves.patch" TIMELINES="rh:1" \
  exec bash tools/h200/tma_session_check.sh
