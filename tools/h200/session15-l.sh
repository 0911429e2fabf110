#!/usr/bin/env bash
# Session 15, call l, on nvidia-h200 (2026-12-01): every launch's span. A timeline's blocks are one launch's (the
# last of its graph), and its span moved by up to 1 µs from call to call; tools/h200/timeline.py now also keeps the
# span of every launch (the first block's start to the last block's end, by atomics on globaltimer) and prints their
# median beside the launch's time. Do rs and its paced forms shorten the span, or the time between launches?
# Timelines of the tree, rs, rsp0, rsc25 and ks (no probe).
#   bash tools/h200/session15-l.sh
P=session15-g-rs.patch
CALL=l SESSION=session15 CHECKS=0 \
  VARIANTS="rs=$P rsp0=$P,session15-k-rsp0.patch rsc25=$P,session15-i-rsc25.patch ks=session15-f-ks.patch" \
  TIMELINES="tree:1 rs:1 rsp0:1 rsc25:1 ks:1" exec bash tools/h200/tma_session_check.sh
