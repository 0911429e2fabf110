#!/usr/bin/env bash
# Session 12, call e, on nvidia-h200 (2026-12-01): where qload = tma2d's time goes (call d: 0.805x of the tma genome).
# Timing variants of the working tree's tma2d (16 rows x 8 warps, 14 stages): nomath (the consumers only wait and
# release), nocopy (the producer arrives without copying: the consumers alone), noz (the chains not tied to each
# release: ptxas sinks them, 168 registers and 276 bytes of spills), pair (two steps a round: both waits, then both
# groups); beside the tma genome (e1).
# (The working tree then: 7da6e88 with session12-tma2d-steps.patch applied; the variants patch that kernel.)
#   bash tools/h200/session12-e.sh
CALL=e SESSION=session12 CHECKS=0 \
  VARIANTS="nomath=session12-e-nomath.patch nocopy=session12-e-nocopy.patch noz=session12-e-noz.patch pair=session12-e-pair.patch" \
  exec bash tools/h200/tma_session_check.sh
