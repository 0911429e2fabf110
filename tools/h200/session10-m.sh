#!/usr/bin/env bash
# Session 10, call m, on nvidia-h200 (2026-12-01): the last wave's tiles claimed (whole waves static; a block claims
# a last-wave tile from a module counter as it starts its last static tile, so the blocks whose copies land sooner
# take them): rt, with call l's row halves (tools/h200/session10-m-rt.patch), xt, without (session10-m-xt.patch),
# 2 and 3 stages; beside the working tree's kernel (669dc28's; family.py of the call with call l's 16 more bytes of
# mbarriers a stage); timelines at the anchor.
#   bash tools/h200/session10-m.sh
CALL=m SESSION=session10 CHECKS=0 VARIANTS="rt=session10-m-rt.patch xt=session10-m-xt.patch" TIMELINES="rt:1 xt:1" \
  exec bash tools/h200/tma_session_check.sh
