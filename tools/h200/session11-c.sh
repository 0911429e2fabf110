#!/usr/bin/env bash
# Session 11, call c, on nvidia-h200 (2026-12-01): kw, an item in two parts of K on their own mbarriers (the warps'
# groups k < 4 of 7, then the rest; session11-c-kw.patch), 2 and 3 stages beside the working tree's kernel (c1);
# timelines at the anchor; the working tree's kernel and the copy ceiling measured alternately, 6 trials
# (tools/h200/ceiling_probe.py: the ceiling read 3.88-3.96 TB/s in call b against 3.98-4.18 before).
#   bash tools/h200/session11-c.sh
CALL=c SESSION=session11 CHECKS=0 VARIANTS="kw=session11-c-kw.patch" TIMELINES="kw:1 tree:1" CEIL="tree:1" \
  exec bash tools/h200/tma_session_check.sh
