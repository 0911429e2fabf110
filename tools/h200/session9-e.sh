#!/usr/bin/env bash
# Session 9, call e, on nvidia-h200 (2026-12-01): stream-K for the last wave (the tail tiles cut into 16-block units
# shared by all blocks; a piece's rows meet in global scratch) and the producer starting its copies before x's
# set-up ends (a named barrier instead of __syncthreads), on 0ef7d01: tools/h200/session9-e-change.patch, as in the
# working tree of the call; session9-e-noearly.patch leaves stream-K alone ("sk"), session9-e-early.patch on 0ef7d01
# the early start alone ("early"). Probes e1 (against 0ef7d01) and e2 (against #70); timelines at the anchor.
#   bash tools/h200/session9-e.sh
CALL=e SESSION=session9 \
  VARIANTS="head=-session9-e-change.patch sk=session9-e-noearly.patch early=-session9-e-change.patch,session9-e-early.patch" \
  TIMELINES="tree:1 sk:1 early:1 head:1" exec bash tools/h200/tma_session_check.sh
