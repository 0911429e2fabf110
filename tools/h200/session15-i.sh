#!/usr/bin/env bash
# Session 15, call i, on nvidia-h200 (2026-12-01): rs's stragglers. In call g's timeline 90% of rs's heavy blocks had
# ended by 19.42 µs (the tree's median: 19.94), but the last at 20.16 and its light blocks' at 20.35: a few blocks
# fell behind (a late item, up to 2.65 µs between landings). rsc (session15-i-rsc.patch on rs): every item's issue
# counts on a module counter (atom.inc wrapping at the launch's total items); a block more than 0.5 items (rsc25:
# 0.25, rsc100: 1) ahead of the pace that count implies for it issues its next part a only once the stage is free,
# as without parts, so that the blocks behind get more of the memory. Beside the working tree; rs again; timeline of rsc.
#   bash tools/h200/session15-i.sh
CALL=i SESSION=session15 CHECKS=0 \
  VARIANTS="rs=session15-g-rs.patch rsc=session15-g-rs.patch,session15-i-rsc.patch rsc25=session15-g-rs.patch,session15-i-rsc25.patch rsc100=session15-g-rs.patch,session15-i-rsc100.patch" \
  TIMELINES="rsc:1 rsc25:1" exec bash tools/h200/tma_session_check.sh
