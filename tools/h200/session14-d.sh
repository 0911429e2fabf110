#!/usr/bin/env bash
# Session 14, call d, on nvidia-h200 (2026-12-01): the last round's tiles claimed (cw: whole rounds static, each
# block claims once a launch with atom.inc wrapping at the grid, 3 (cw) or 2 (cw2) items before it would issue the
# claimed tile; a failed claim is a stop for its consumers), so that the blocks that lag (call c's p3ld10 timeline:
# the slowest are slow from their second or third item on) leave the last tiles to the others. On the 2-stage
# kernel and on p3 (3 stages, the faster middle whose slowest blocks cost it in calls m and c). Beside the working
# tree's kernel, with ld10h again; timelines.
#   bash tools/h200/session14-d.sh
CALL=d SESSION=session14 CHECKS=0 \
  VARIANTS="cw=session14-d-cw.patch cw2=session14-d-cw2.patch ld10h=session14-b-ld10h.patch p3cw=session13-m-p3.patch,session14-d-p3cw.patch p3cw2=session13-m-p3.patch,session14-d-p3cw2.patch" \
  TIMELINES="cw:1 p3cw:2" exec bash tools/h200/tma_session_check.sh
