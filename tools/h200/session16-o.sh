#!/usr/bin/env bash
# Session 16, call o, on nvidia-h200 (2026-12-01): call n's PDL parts again, 40 rounds, with SM clocks, and pdlw
# (session16-o-pdlw.patch: the waits without a trigger, so the next launch's blocks start once every block here
# has exited). Call n (12 rounds): pdl 1.013x, pdll 1.019x at the anchor, pdl's source launched plainly 0.985x.
#   bash tools/h200/session16-o.sh  (first run: every round throttled with NVML on, the probe stopped; run again)
P=session16-n-pdl.patch
CALL=o SESSION=session16 CHECKS=0 ROUNDS=40 \
  VARIANTS="pdl=$P pdll=$P,session16-n-pdll.patch pdlw=$P,session16-o-pdlw.patch" \
  exec bash tools/h200/tma_session_check.sh
