#!/usr/bin/env bash
# Session 12, call h, on nvidia-h200 (2026-12-01): call g's tma2d timing variants again (the tree's producer now waits
# on tile 0's own mbarrier, whichever kind it has): nofine, last, all, nowait beside the tma genome (h1); no checks.
# (The working tree then: 7da6e88 with session12-tma2d.patch applied; the path was not kept.)
#   bash tools/h200/session12-h.sh
CALL=h SESSION=session12 CHECKS=0 \
  VARIANTS="nofine=session12-h-nofine.patch last=session12-h-last.patch all=session12-h-all.patch nowait=session12-h-nowait.patch" \
  exec bash tools/h200/tma_session_check.sh
