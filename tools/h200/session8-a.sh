#!/usr/bin/env bash
# Session 8, call a, on nvidia-h200 (2026-12-01): qload=tma's mma takes 8 rows and 2 blocks (A's rows 0..7 block
# b, 8..15 block b + 1; B's even columns block b's digits, odd ones block b + 1's; D's c0 and c3 kept), and the code
# word's selectors come straight from the window words (tools/h200/session8-a-pairs.patch against a5a7518, as in
# the working tree of the call): GPU tests, sanitizers, probes against the kernel before and against #70, ncu, and
# the recorded sweep's tma genomes measured again.
#   bash tools/h200/session8-a.sh
SESSION=session8 NCU=1 exec bash tools/h200/tma_change_check.sh a session8-a-pairs.patch
