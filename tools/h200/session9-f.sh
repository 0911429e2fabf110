#!/usr/bin/env bash
# Session 9, call f, on nvidia-h200 (2026-12-01): call e's early start alone (the producer sets up the mbarriers and
# copies at once; the consumers meet it on a named barrier after x's set-up), and every producer lane arriving on the
# partials' free mbarrier (racecheck at a geometry that reuses the buffers): tools/h200/session9-f-change.patch on
# 0ef7d01, as in the working tree of the call (stream-K of call e not kept). Probes f1 (against 0ef7d01) and f2
# (against #70), timelines, and the recorded sweep's tma genomes measured again.
#   bash tools/h200/session9-f.sh
CALL=f SESSION=session9 VARIANTS="head=-session9-f-change.patch" TIMELINES="tree:1 head:1" SWEEP=1 \
  exec bash tools/h200/tma_session_check.sh
