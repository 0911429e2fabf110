#!/usr/bin/env bash
# Session 14, call l, on nvidia-h200 (2026-12-01), on 48d7934's kernel: call k's p3cw1 (p3, the last round claimed one
# item ahead: its 9-item blocks ended within 0.8 µs, its start as late as p3's) with the light blocks' late start by the
# static schedule (p3ldcw1: the claims leave every block's count at its most, so the late start's test uses the static
# count), beside the working tree's kernel; p3cw1 again; a timeline of p3ldcw1.
#   bash tools/h200/session14-l.sh
CALL=l SESSION=session14 CHECKS=0 \
  VARIANTS="p3ldcw1=session13-m-p3.patch,session14-k-p3cw1.patch,session14-l-p3ldcw1.patch p3cw1=session13-m-p3.patch,session14-k-p3cw1.patch" \
  TIMELINES="p3ldcw1:2" exec bash tools/h200/tma_session_check.sh
