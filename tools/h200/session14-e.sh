#!/usr/bin/env bash
# Session 14, call e, on nvidia-h200 (2026-12-01). The working tree now has the light blocks' late start (calls a-d).
# e1: a block's last item with its rows 0-7 early (le: session14-e-le.patch, in the 3-stage genome's shared memory
# with 2 stages, the third's room holding the early half): rows 0-7 go out right after item n - 2's copies (le) or once
# item n - 3 has landed (lel), rows 8-15 at the usual point, and the consumers take the last item's row halves as
# they land (h = 0 while rows 8-15 are in flight), so that less compute follows the last bytes; c2 is the same
# shared memory without it (session13-n-c2in3.patch). Beside the working tree's 2-stage genome; checks of the
# working tree (GPU tests, memcheck, racecheck); timelines of the tree, le, and x's set-up alone (xonly: where the
# 1.4 µs between launches go).
#   bash tools/h200/session14-e.sh
CALL=e SESSION=session14 CHECKS=1 \
  VARIANTS="c2=session13-n-c2in3.patch le=session14-e-le.patch lel=session14-e-lel.patch xonly=session14-e-xonly.patch" \
  TIMELINES="tree:1 le:2 xonly:1" exec bash tools/h200/tma_session_check.sh
