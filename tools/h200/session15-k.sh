#!/usr/bin/env bash
# Session 15, call k, on nvidia-h200 (2026-12-01): rs with a fixed priority. The heavy blocks (a tile more) push
# (rs: part a of item i + 2 once item i's part a is done), the light blocks hold (part a once the stage is free,
# as without parts), so that the heavy blocks get more of the memory all along. rsp (session15-k-rsp.patch on rs) with
# the light blocks' late start as in the tree, rsp0 without it, rsp29 with half of it. Beside the working tree;
# timelines of rsp and rsp0.
#   bash tools/h200/session15-k.sh
P=session15-g-rs.patch
CALL=k SESSION=session15 CHECKS=0 \
  VARIANTS="rsp=$P,session15-k-rsp.patch rsp0=$P,session15-k-rsp0.patch rsp29=$P,session15-k-rsp29.patch" \
  TIMELINES="rsp:1 rsp0:1" exec bash tools/h200/tma_session_check.sh
