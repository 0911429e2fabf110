#!/usr/bin/env bash
# Session 14, call f, on nvidia-h200 (2026-12-01): with the light blocks' late start in the working tree, the first
# fill's gap again (1800, 2200, 3200 cycles against 2700: the heavy blocks' item 0 now lands 0.7 µs sooner) and the
# late start's delay at 45 and 70 cycles a KB against 58. Beside the working tree's kernel.
#   bash tools/h200/session14-f.sh
CALL=f SESSION=session14 CHECKS=0 \
  VARIANTS="g1800=session14-f-g1800.patch g2200=session14-f-g2200.patch g3200=session14-f-g3200.patch lc45=session14-f-lc45.patch lc70=session14-f-lc70.patch" \
  exec bash tools/h200/tma_session_check.sh
