#!/usr/bin/env bash
# Prepared in session 16 (2026-12-01), not run there (its device time was spent): where PDL's launches still wait.
# Timelines of the tree plainly and with PDL (tools/h200/timeline.py --pdl stamps the consumers' pass of
# griddepcontrol.wait), 2 and 3 stages; and 3 stages beside 2 with PDL (session 16's campaign v measured the 3-stage
# genome at 0.973x of the 2-stage one with PDL, where plain launches gave 0.90x: each of the next launch's blocks
# fills 3 stages during the tail instead of 2). CHECKS=1 runs the GPU tests first: Family.pdl_safe replaced the
# Launch field after session 16's calls, and tests/test_pdl_launch.py's GPU test launches through it.
#   bash tools/h200/session17-a.sh
CALL=a SESSION=session17 CHECKS=1 ROUNDS=40 \
  TIMELINES="tree:1 tree:1:8:pdl tree:2:8:pdl" exec bash tools/h200/tma_session_check.sh
