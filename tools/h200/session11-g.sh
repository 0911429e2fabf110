#!/usr/bin/env bash
# Session 11, call g, on nvidia-h200 (2026-12-01): the working tree's kernel (a0ec152's with the consumers' slot
# address computed before the full wait: 127 registers, not 142, at the anchor; call f's lp0 carried it and read
# 1.009x) checked (GPU tests of the fp4 mma genomes, memcheck, racecheck) and timed beside a0ec152's kernel (head,
# session11-g-head.patch reversing it) for 2 stages (g1), 3 stages (g2) and 4 warps x 5 stages (g3, the path
# without x's B in registers); beside champion #70 (g4); the copy ceiling (best of 3 x 4 GiB) alternating with
# it, 6 trials; timeline at the anchor.
#   bash tools/h200/session11-g.sh
CALL=g SESSION=session11 CHECKS=1 VARIANTS="head=session11-g-head.patch" TIMELINES="tree:1 head:1" CEIL="tree:1" \
  exec bash tools/h200/tma_session_check.sh
