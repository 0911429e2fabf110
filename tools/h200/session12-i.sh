#!/usr/bin/env bash
# Session 12, call i, on nvidia-h200 (2026-12-01): the first fill again (call a: issuing item 1 2700 cycles after item
# 0's copies read 1.013x at the anchor but 0.878x at in4096_out4096, where item 0 lands sooner). Variants m<D>
# (session12-i-m<D>.patch): item 1 once item 0 has landed or D cycles after its copies, whichever comes first
# (mbarrier.test_wait polled against clock64), D = 2700, 3600, 4500, beside the working tree's kernel (i1).
#   bash tools/h200/session12-i.sh
CALL=i SESSION=session12 CHECKS=0 \
  VARIANTS="m2700=session12-i-m2700.patch m3600=session12-i-m3600.patch m4500=session12-i-m4500.patch" \
  exec bash tools/h200/tma_session_check.sh
