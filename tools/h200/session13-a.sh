#!/usr/bin/env bash
# Session 13, call a, on nvidia-h200 (2026-12-01): a dynamic schedule with the claims one tile ahead
# (session13-a-dyn.patch: a block's first two tiles static, the rest claimed from a module counter while the current
# tile is copied, so no copy waits for an atomic; session 10's dyn claimed before the first copy), the first fill of
# session 12 call i (item 1 at item 0's landing or 2700 cycles after its copies, session12-i-m2700.patch), both
# (session13-a-dynff.patch), beside the working tree's kernel (a1); and the ring with consumers that only spin 2600
# or 1800 cycles an item instead of computing (timing variants, a2: how much of the time is the ring's structure
# with a fixed compute time). Timelines of all; racecheck of dyn at in7168_out7168_bf16.
#   bash tools/h200/session13-a.sh
CALL=a SESSION=session13 CHECKS=0 RACE="dyn" \
  VARIANTS="ff=session12-i-m2700.patch dyn=session13-a-dyn.patch dynff=session13-a-dynff.patch spin2600=session13-a-spin2600.patch spin1800=session13-a-spin1800.patch" \
  TIMELINES="tree:1 ff:1 dyn:1 dynff:1 spin2600:1 spin1800:1" exec bash tools/h200/tma_session_check.sh
