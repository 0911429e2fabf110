#!/usr/bin/env bash
# Prepared in session 17 (2026-12-01), not run there: where a PDL launch triggers its dependents. Session 17's
# timelines (logs/h200/2026-12-01-session17/a) put a launch's period at its last block's trigger (after its last
# copies) plus about 1 µs, and one straggler's trigger 2.3 µs after the median; session 16 measured the trigger at the
# block's start 1.013-1.021x against 1.025-1.037x after the last copies. Between them: the trigger one or two items
# before the last copies (tools/h200/session18-trig1.patch, -trig2.patch), 40 rounds beside the tree, with PDL.
#   bash tools/h200/session18-a.sh
CALL=a SESSION=session18 CHECKS=0 ROUNDS=40 VARIANTS="trig1=session18-trig1.patch trig2=session18-trig2.patch" \
  TIMELINES="tree:1:8:pdl trig1:1:8:pdl" exec bash tools/h200/tma_session_check.sh
