#!/usr/bin/env bash
# Session 15, call g, on nvidia-h200 (2026-12-01), on 2e8f7d4's kernel: items in two parts of rows. Call f's parts of
# K (ks) ended 0.7 µs sooner after the last bytes, but the ring moved 3.9 TB/s against 4.1 (each row read in two
# pieces at two times). rs (session15-g-rs.patch): part a is rows 0-7 of the item, part b rows 8-15 (two runs of
# 30 KB), the consumers taking row half 0 of every group and then row half 1; the rest as ks. Twice beside the
# working tree; timelines of both.
#   bash tools/h200/session15-g.sh
CALL=g SESSION=session15 CHECKS=0 VARIANTS="rs=session15-g-rs.patch" TIMELINES="tree:1 rs:1" \
  exec bash tools/h200/tma_session_check.sh
