#!/usr/bin/env bash
# Session 13, call o, on nvidia-h200 (2026-12-01): call m's p3 with the 2-stage kernel's start (item 2 once item 0 is
# released, not once it has landed, which delayed item 1) and the rows of an item that go out at the 3-stage point
# 8 (p3s8), 5 (p3s5) or 11 (p3s11), the rest at the 2-stage point (session13-o-p3s*.patch), beside the working tree's
# 2-stage genome. Timelines.
#   bash tools/h200/session13-o.sh
CALL=o SESSION=session13 CHECKS=0 \
  VARIANTS="p3s8=session13-o-p3s8.patch p3s5=session13-o-p3s5.patch p3s11=session13-o-p3s11.patch" \
  TIMELINES="tree:1 p3s8:2 p3s5:2" exec bash tools/h200/tma_session_check.sh
