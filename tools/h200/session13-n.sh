#!/usr/bin/env bash
# Session 13, call n, on nvidia-h200 (2026-12-01): is it the shared memory that slows x's set-up with 3 stages (call
# m: x's maximum at 1.87-1.97 µs against 1.45)? The 2-stage kernel launched with the 3-stage genome's 214,400 bytes
# of dynamic shared memory (session13-n-c2in3.patch: TNSTAGE capped at 2), beside the 2-stage genome. Timelines.
#   bash tools/h200/session13-n.sh
CALL=n SESSION=session13 CHECKS=0 VARIANTS="c2in3=session13-n-c2in3.patch" TIMELINES="tree:1 c2in3:2" \
  exec bash tools/h200/tma_session_check.sh
