#!/usr/bin/env bash
# Session 10, call a, on nvidia-h200 (2026-12-01): timing variants of c0fb6a1's tma kernel (working tree unchanged):
# L2 prefetch of the block's next item as each item's copy is issued (pfA: from item 0, pfB: from item 1; both also
# prefetch item 0 before the mbarriers are set up; pfD: only that), tools/h200/session10-a-pf*.patch; every consumer
# lane arriving on the stage's empty mbarrier (lanes, session10-a-lanes.patch: racecheck at in7168_out7168_bf16).
# Probe a1 against the working tree's kernel; timelines at the anchor.
#   bash tools/h200/session10-a.sh
CALL=a SESSION=session10 CHECKS=0 RACE="lanes" \
  VARIANTS="pfA=session10-a-pf.patch pfB=session10-a-pf.patch,session10-a-pfB.patch pfD=session10-a-pf.patch,session10-a-pfD.patch lanes=session10-a-lanes.patch" \
  TIMELINES="tree:1 pfA:1 pfB:1 pfD:1 lanes:1 pfB:2" \
  exec bash tools/h200/tma_session_check.sh
