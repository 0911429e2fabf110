#!/usr/bin/env bash
# Session 13, call j, on nvidia-h200 (2026-12-01): call i's dynamic schedule with the lambda written out twice (call
# i's build failed there: the device's NVRTC took the lambda for a host function), session13-j-d2.patch: atom.inc
# claims two tiles ahead, an even tile and an odd one per loop turn, each parity's claim in its own register. Beside
# the working tree's kernel; timelines (the odd tiles' issue not stamped); racecheck at in7168_out7168_bf16.
#   bash tools/h200/session13-j.sh
CALL=j SESSION=session13 CHECKS=0 VARIANTS="d2=session13-j-d2.patch" TIMELINES="tree:1 d2:1" RACE="d2" \
  exec bash tools/h200/tma_session_check.sh
