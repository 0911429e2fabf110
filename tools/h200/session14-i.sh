#!/usr/bin/env bash
# Session 14, call i, on nvidia-h200 (2026-12-01): the first fill's gap below 2200 cycles (the kept kernel, 8ebb9d2):
# 0 (items 0 and 1 at once), 600, 1200, 1800, beside 2200; timelines of the tree and g0.
#   bash tools/h200/session14-i.sh
CALL=i SESSION=session14 CHECKS=0 \
  VARIANTS="g0=session14-i-g0.patch g600=session14-i-g600.patch g1200=session14-i-g1200.patch g1800=session14-i-g1800.patch" \
  TIMELINES="tree:1 g0:1" exec bash tools/h200/tma_session_check.sh
