#!/usr/bin/env bash
# Session 15, call j, on nvidia-h200 (2026-12-01): where in a block's run rs's early parts pay. Call i: rs paced by
# the module counter (rsc25) 1.007x at the anchor, rs alone 0.963x in the same call. Fixed rules instead of the pace
# (session15-j-*.patch on rs: rsc with the rule): rsh holds part a for the whole release from item nitems / 2 on (rs early, whole items
# late), rsl for the last two items, rse for the first half (whole items early, rs late); rsc25 again. Beside the
# working tree; timelines of rsh and rse.
#   bash tools/h200/session15-j.sh
P=session15-g-rs.patch
CALL=j SESSION=session15 CHECKS=0 \
  VARIANTS="rsc25=session15-g-rs.patch,session15-i-rsc25.patch rsh=$P,session15-j-rsh.patch rsl=$P,session15-j-rsl.patch rse=$P,session15-j-rse.patch" \
  TIMELINES="rsh:1 rse:1" exec bash tools/h200/tma_session_check.sh
