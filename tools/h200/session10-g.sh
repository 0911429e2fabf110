#!/usr/bin/env bash
# Session 10, call g, on nvidia-h200 (2026-12-01): the kept change, x's B registers held for the whole kernel
# (tools/h200/session10-g-change.patch on c0fb6a1, the working tree of the call): GPU tests, memcheck, racecheck;
# probes g1 (against c0fb6a1's kernel), g2 (against champion #70), g3 (two ways to start a third stage's first item,
# session10-g-start-*.patch, timing variants); timelines; the recorded sweep's tma genomes measured again.
#   bash tools/h200/session10-g.sh
CALL=g SESSION=session10 SWEEP=1 \
  VARIANTS="head=-session10-g-change.patch s2a=session10-g-start-done0.patch s2b=session10-g-start-land1.patch" \
  TIMELINES="tree:1 head:1 tree:2 s2a:2 s2b:2" exec bash tools/h200/tma_session_check.sh
