#!/usr/bin/env bash
# Session 15, call d, on nvidia-h200 (2026-12-01), on 2e8f7d4's kernel: what holds item 0's copies back 0.37 µs after
# the block's start. st (session15-d-st.patch): the tree with the producer's start stamped in its timeline (tl[10]
# after the mbarriers' set-up, tl[11] after its bar.arrive, tl[12] after the light blocks' check, tl[13] item 0's
# copies issued). nodiv: the light blocks' check without an integer division. xafter: nodiv, and the consumers load x
# only once the producer has issued item 0's copies (their x loads ahead of the producer in the load/store queue?).
#   bash tools/h200/session15-d.sh
CALL=d SESSION=session15 CHECKS=0 \
  VARIANTS="st=session15-d-st.patch nodiv=session15-d-nodiv.patch xafter=session15-d-xafter.patch" \
  TIMELINES="st:1 nodiv:1 xafter:1" exec bash tools/h200/tma_session_check.sh
