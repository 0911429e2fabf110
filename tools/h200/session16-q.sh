#!/usr/bin/env bash
# Session 16, call q, on nvidia-h200 (2026-12-01): the working tree's PDL (kernel.cu's pdll form behind EVO_PDL,
# gates.perf.launch: pdl, configs/fp4_matvec_pdl.yaml). GPU tests (tests/test_driver_launch.py,
# tests/test_pdl_launch.py, the fp4 mma tests), memcheck and racecheck of the tree; the tree plainly and with PDL
# side by side (tools/h200/pdl_probe.py, 40 rounds); the copy ceiling alternating with the tree, plain and PDL.
#   bash tools/h200/session16-q.sh
CALL=q SESSION=session16 CHECKS=1 ROUNDS=40 CEIL="tree:1 tree:1:8:tma:pdl" exec bash tools/h200/tma_session_check.sh
