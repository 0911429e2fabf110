#!/usr/bin/env bash
# Session 10, call f, on nvidia-h200 (2026-12-01): on top of call e's X (tools/h200/session10-e-xreg.patch), each
# alone and together: T, the tile end with every lane's digit sums (the producer adds them in the warp's former
# shuffle order; session10-f-tileend.patch, family.py in the working tree with 4x the partials' shared memory); C,
# 4-row bulk copies where the row stride puts 4 rows on 4 bank quads (session10-f-chunks*.patch); e, the scale's
# fp32 bits from its byte by integer multiply-adds, exact for bytes 0 and 255 (session10-f-scale*.patch). Beside the
# working tree's kernel (c0fb6a1's); racecheck of XTCe at in7168_out7168_bf16; timelines at the anchor.
#   bash tools/h200/session10-f.sh
X=session10-e-xreg.patch T=session10-f-tileend.patch
CALL=f SESSION=session10 CHECKS=0 RACE="XTCe" \
  VARIANTS="X=$X XT=$X,$T XC=$X,session10-f-chunks.patch Xe=$X,session10-f-scale.patch XTC=$X,$T,session10-f-chunks-on-T.patch XTe=$X,$T,session10-f-scale-on-T.patch XTCe=$X,$T,session10-f-chunks-on-T.patch,session10-f-scale-on-TC.patch" \
  TIMELINES="tree:1 X:1 XT:1 XTC:1 Xe:1 XTCe:1" exec bash tools/h200/tma_session_check.sh
