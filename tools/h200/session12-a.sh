#!/usr/bin/env bash
# Session 12, call a, on nvidia-h200 (2026-12-01): the producer's first fill. The working tree's kernel issues the
# other stages' first items once item 0 has landed (session 9 call a), and the timeline (session 11 call g) shows the
# SM with nothing in flight from item 0's landing (3.15 µs) until item 1's bytes flow, item 1 landing 2.4 µs after
# item 0. Variants g<D> (session12-a-g<D>.patch) issue item i < stages D * i SM cycles after item 0's copies
# instead: D = 0 (at once, as before session 9), 900, 1800, 2700; 2 stages (a1) and 3 stages (a2) beside the
# working tree's 2 stages; timelines of the tree and g1800.
#   bash tools/h200/session12-a.sh
CALL=a SESSION=session12 CHECKS=0 \
  VARIANTS="g0=session12-a-g0.patch g900=session12-a-g900.patch g1800=session12-a-g1800.patch g2700=session12-a-g2700.patch" \
  TIMELINES="tree:1 g1800:1" exec bash tools/h200/tma_session_check.sh
