#!/usr/bin/env bash
# Session 11, call b, on nvidia-h200 (2026-12-01): call a again with rt's stop fixed (session11-b-rt.patch, rb: a
# block whose claim fails arrives only on rows 0-7's barrier; call a's rt also arrived on rows 8-15's, whose phase
# may still wait for the item two back's bytes, and failed with a launch failure once timed in graphs). Probes: xt
# (b1), then rb (b2), 2 and 3 stages, each beside the working tree's kernel; timelines at the anchor.
#   bash tools/h200/session11-b.sh
CALL=b SESSION=session11 CHECKS=0 VARIANTS="rb=session11-b-rt.patch xt=session10-m-xt.patch" \
  TIMELINES="xt:1 rb:1 tree:1" exec bash tools/h200/tma_session_check.sh
