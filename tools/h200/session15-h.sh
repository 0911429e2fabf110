#!/usr/bin/env bash
# Session 15, call h, on nvidia-h200 (2026-12-01): call g's rs with shorter light-block delays. In call g's timeline
# rs's heavy blocks ended 0.9 µs sooner than the tree's (median 18.96 against 19.84 µs; an item every 1.77 µs against
# 1.93), but its light blocks, started late by the tree's delay (58 cycles a KB of an item), landed their first items
# at 4.4-4.5 µs and ended last. rs with 0, 15, 29 and 43 cycles a KB, and as in call g, beside the working tree;
# timelines of rs0 and rs29.
#   bash tools/h200/session15-h.sh
CALL=h SESSION=session15 CHECKS=0 \
  VARIANTS="rs=session15-g-rs.patch rs0=session15-g-rs.patch,session15-h-d0.patch rs15=session15-g-rs.patch,session15-h-d15.patch rs29=session15-g-rs.patch,session15-h-d29.patch rs43=session15-g-rs.patch,session15-h-d43.patch" \
  TIMELINES="rs0:1 rs29:1" exec bash tools/h200/tma_session_check.sh
