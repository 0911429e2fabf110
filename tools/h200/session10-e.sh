#!/usr/bin/env bash
# Session 10, call e, on nvidia-h200 (2026-12-01): the consumers' shared-memory wavefronts (call c: about 83% of
# the LSU pipe while they compute). X (tools/h200/session10-e-xreg.patch): x's B registers held for the whole kernel
# where a tile's groups split evenly over its warps (each warp takes the same groups of every tile; 4 fewer
# wavefronts a group of 34); Xs (+ session10-e-shift.patch, a timing variant, not exact for scale bytes 0 and 255):
# the scale as its byte shifted into an fp32 exponent instead of the table (8 fewer); s: the shift alone
# (+ session10-e-noxreg.patch). Beside the working tree's kernel; timelines at the anchor.
#   bash tools/h200/session10-e.sh
CALL=e SESSION=session10 CHECKS=0 \
  VARIANTS="X=session10-e-xreg.patch Xs=session10-e-xreg.patch,session10-e-shift.patch s=session10-e-xreg.patch,session10-e-shift.patch,session10-e-noxreg.patch" \
  TIMELINES="tree:1 X:1 Xs:1 s:1 X:2" exec bash tools/h200/tma_session_check.sh
