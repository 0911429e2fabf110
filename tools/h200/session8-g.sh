#!/usr/bin/env bash
# Session 8, call g, on nvidia-h200 (2026-12-01): x's digits computed by each warp as it reaches its groups in item 0
# (tools/h200/session8-g-lazyx.patch against 6c4cd0c, as in the working tree of the call): with whole rows an item
# and x held in registers, no second barrier before item 0 and the digit work beside the first groups' mma (call d:
# x's set-up costs 1.65 µs of the kernel). GPU tests, memcheck, racecheck; probes g1 against 6c4cd0c's kernel, g2
# against #70; the recorded sweep's tma genomes measured again.
#   bash tools/h200/session8-g.sh
SESSION=session8 exec bash tools/h200/tma_change_check.sh g session8-g-lazyx.patch
