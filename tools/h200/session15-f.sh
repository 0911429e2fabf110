#!/usr/bin/env bash
# Session 15, call f, on nvidia-h200 (2026-12-01), on 2e8f7d4's kernel: items in two parts of K again (session 9 call
# d, on today's kernel). ks (session15-f-ks.patch): where x's B stays in registers and with 2 stages, an item lands
# and is released as part a (each warp's first 4 of 7 groups: the rows' first 2176 bytes) and part b, each on its own
# full and empty mbarriers; part a of item i + 2 goes out once item i's part a is done, and a block's last item's
# part a lands before its part b. 16 x 8 and 16 x 4 beside the working tree's 16 x 8; timelines of the tree and ks.
#   bash tools/h200/session15-f.sh
CALL=f SESSION=session15 CHECKS=0 VARIANTS="ks=session15-f-ks.patch" TIMELINES="tree:1 ks:1" \
  exec bash tools/h200/tma_session_check.sh
