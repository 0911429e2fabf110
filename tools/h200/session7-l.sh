#!/usr/bin/env bash
# Session 7, call l, on nvidia-h200 (2026-12-01): the producer prefetches into L2 the item that takes a stage next
# (tools/h200/session7-l-prefetch.patch against 132b138, as in the working tree of the call).
#   bash tools/h200/session7-l.sh
exec bash tools/h200/tma_change_check.sh l session7-l-prefetch.patch
