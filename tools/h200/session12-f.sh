#!/usr/bin/env bash
# Session 12, call f, on nvidia-h200 (2026-12-01): call e found tma2d's consumers alone at 24.8 µs (a step a wait:
# 149 instructions, no overlap between steps) while its ring alone took 19.96. Timing variants: tw (a whole tile a
# round: its 7 steps' waits, then its 7 groups in one block, then 7 releases; copies still one step each), twl (tw but
# the block's last tile a step a round, so its compute follows its steps as they land), twfl (the first tile too);
# 2 and 3 tiles' worth of stages (unroll 1, 2); beside the tma genome (f1).
# (The working tree then: 7da6e88 with session12-tma2d-steps.patch applied; the variants patch that kernel.)
#   bash tools/h200/session12-f.sh
CALL=f SESSION=session12 CHECKS=0 \
  VARIANTS="tw=session12-f-tw.patch twl=session12-f-twl.patch twfl=session12-f-twfl.patch" \
  exec bash tools/h200/tma_session_check.sh
