#!/usr/bin/env bash
# Session 12, call d, on nvidia-h200 (2026-12-01): qload = tma2d (the working tree): items of one 32-block step
# (16 rows x 544 B) copied by one tensor copy each into a ring of unroll + 1 whole rows' worth of stages (call c:
# such a ring alone delivers the anchor's weights as fast as the whole-row ring). GPU tests of every fp4 mma genome
# (tma2d's four added), memcheck and racecheck of tma and tma2d genomes; tma2d genomes beside the tma champion's
# (d1) and beside #70 (d2); the copy ceiling alternating with tma2d, 6 trials.
# (The working tree then: 7da6e88 with session12-tma2d-steps.patch applied; the path was not kept.)
#   bash tools/h200/session12-d.sh
CALL=d SESSION=session12 CHECKS=1 CEIL="tree:1:8:tma2d" exec bash tools/h200/tma_session_check.sh
