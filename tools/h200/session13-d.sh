#!/usr/bin/env bash
# Session 13, call d, on nvidia-h200 (2026-12-01): the producer's mbarriers set up a lane each, each lane with its own
# fence (session13-d-pinit.patch), instead of lane 0's eight inits in a row (item 0's copies go out 0.26 µs after
# the block starts), beside the working tree's kernel (call c's first fill). Timelines.
#   bash tools/h200/session13-d.sh
CALL=d SESSION=session13 CHECKS=0 VARIANTS="pinit=session13-d-pinit.patch" TIMELINES="tree:1 pinit:1" \
  exec bash tools/h200/tma_session_check.sh
