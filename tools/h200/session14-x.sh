#!/usr/bin/env bash
# Prepared in session 13 for a session-14 call on nvidia-h200 (not run yet; date the run when it is). Two
# questions session 13 left: (1) why call j's dynamic schedule (d2, session13-j-d2.patch) moved the ring's middle at
# 4.07 TB/s against 4.30: d2static (session14-x-d2static.patch) keeps all of its structure and its claims but takes
# the tiles in the static order, d2noatom (session14-x-d2noatom.patch) the same without the claims; (2) whether call
# m's p3 (3 stages, rows 0-7 at the 3-stage point, rows 8-15 at the 2-stage point: 0.977x, a faster middle, the
# slowest block later) reproduces, and p3e (session14-x-p3e.patch): the same with each block's last two items whole at
# the 2-stage point. All beside the working tree's 2-stage genome; timelines.
#   bash tools/h200/session14-x.sh
CALL=x SESSION=session14 CHECKS=0 \
  VARIANTS="d2=session13-j-d2.patch d2static=session14-x-d2static.patch d2noatom=session14-x-d2noatom.patch p3=session13-m-p3.patch p3e=session14-x-p3e.patch" \
  TIMELINES="tree:1 d2:1 d2static:1 p3:2 p3e:2" exec bash tools/h200/tma_session_check.sh
