#!/usr/bin/env bash
# Session 16, call t, on nvidia-h200 (2026-12-01): the light blocks' late start under PDL. It was set for plain
# launches (session 13-14); with PDL a launch's blocks start in the launch before's tail. Against the tree with PDL:
# pd0 (no late start under PDL), pdh (half), pd15 (1.5x); the tree plainly last. 40 rounds.
#   bash tools/h200/session16-t.sh
CALL=t SESSION=session16 CHECKS=0 ROUNDS=40 \
  VARIANTS="pd0=session16-t-pd0.patch pdh=session16-t-pdh.patch pd15=session16-t-pd15.patch" \
  exec bash tools/h200/tma_session_check.sh
