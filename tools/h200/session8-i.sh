#!/usr/bin/env bash
# Session 8, call i, on nvidia-h200 (2026-12-01): 6c4cd0c's kernel without the weights' L2 evict_first policy
# (tools/h200/session8-i-nol2.patch, as in the working tree of the call; the even K steps stay). Calls g and h timed
# 6c4cd0c's kernel at in7168_out7168_bf16 (27 MB of weights: they fit in L2) at 13.2–13.9 µs beside kernels that
# read no weights or read them evict_first too, against 11.3 µs beside one that keeps them (call f).
# GPU tests, memcheck, racecheck; probes: i1 the kernel against itself (A/A), i2 against 6c4cd0c's, i3 against #70;
# the recorded sweep's tma genomes measured again.
#   bash tools/h200/session8-i.sh
mkdir -p /tmp/evo-variants/i-same && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/i-same/ || exit 1
SESSION=session8 exec bash tools/h200/tma_change_check.sh i session8-i-nol2.patch
