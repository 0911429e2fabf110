#!/usr/bin/env bash
# Session 15, call e, on nvidia-h200 (2026-12-01), on 2e8f7d4's kernel: item 0's copies sooner. Call d's stamps: the
# producer's mbarrier set-up ends 0.17-0.20 µs after the block's start, the light blocks' check (an integer division)
# 0.12 µs more (0.05 without it), item 0's copies go out at 0.37-0.42 µs. ff (session15-e-ff.patch, on call d's
# nodiv): item 0's mbarrier alone first, item 0's copies at once where the block does not start late, the other
# mbarriers after them. ff twice and nodiv beside the working tree; timelines of ff and of call d's st.
#   bash tools/h200/session15-e.sh
CALL=e SESSION=session15 CHECKS=0 \
  VARIANTS="st=session15-d-st.patch nodiv=session15-d-nodiv.patch ff=session15-e-ff.patch" \
  TIMELINES="st:1 ff:1" exec bash tools/h200/tma_session_check.sh
