#!/usr/bin/env bash
# Session 11, call a, on nvidia-h200 (2026-12-01): session 10's unrun call m. The last wave's tiles claimed (whole
# waves static; a block claims a last-wave tile from a module counter as it starts its last static tile, so the
# blocks whose copies land sooner take them): rt, with session 10 call l's row halves (session10-m-rt.patch), xt,
# without (session10-m-xt.patch), 2 and 3 stages; beside the working tree's kernel (a0ec152's, family.py with 16
# more bytes of mbarriers a stage for the patches' second pair of barriers); timelines at the anchor.
#   bash tools/h200/session11-a.sh
CALL=a SESSION=session11 CHECKS=0 VARIANTS="rt=session10-m-rt.patch xt=session10-m-xt.patch" TIMELINES="rt:1 xt:1 tree:1" \
  exec bash tools/h200/tma_session_check.sh
