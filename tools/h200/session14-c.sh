#!/usr/bin/env bash
# Session 14, call c, on nvidia-h200 (2026-12-01): session 13's p3 (3 stages, rows 0-7 of an item at the 3-stage
# point, 8-15 at the 2-stage point: the middle at 4.57 TB/s, the median block 0.6 µs sooner, the slowest later and the
# start later) and p3e (its last two items whole at the 2-stage point), each alone and with call a's light-block
# delay (ld10: the heavy blocks have the memory to themselves at the start), beside the working tree's 2-stage
# kernel; ld10h again. Timelines of the combinations.
#   bash tools/h200/session14-c.sh
CALL=c SESSION=session14 CHECKS=0 \
  VARIANTS="ld10h=session14-b-ld10h.patch p3=session13-m-p3.patch p3ld10=session13-m-p3.patch,session14-a-ld10.patch p3e=session14-x-p3e.patch p3eld10=session14-x-p3e.patch,session14-a-ld10.patch" \
  TIMELINES="p3ld10:2 p3eld10:2" exec bash tools/h200/tma_session_check.sh
