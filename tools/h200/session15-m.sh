#!/usr/bin/env bash
# Prepared in session 15 (2026-12-01), not run there (no machine was lent after call k): rs with the last round
# claimed. rs (session15-g-rs.patch) reads at 4.5 TB/s in the middle but a few blocks fall behind and end last;
# rscw (session15-m-rscw.patch on rs): every block takes the whole rounds and claims one tile of the last round,
# 3 items ahead (rscw1: 1 ahead), from a module counter (atom.inc wrapping at the grid); a failed claim is a stop for
# the block's consumers (a flag, then part a's mbarrier arrived without bytes). Session 14's cw on the 2-stage kernel
# took its consumers to 143 registers; with rs's branch after the waits, 127 (NVRTC, CPU). Beside the working tree,
# rs too; racecheck of rscw at in7168_out7168_bf16; timelines of rs and rscw.
#   bash tools/h200/session15-m.sh
P=session15-g-rs.patch
CALL=m SESSION=session15 CHECKS=0 \
  VARIANTS="rs=$P rscw=$P,session15-m-rscw.patch rscw1=$P,session15-m-rscw1.patch" RACE="rscw" \
  TIMELINES="rs:1 rscw:1" exec bash tools/h200/tma_session_check.sh
