#!/usr/bin/env bash
# Session 7, call i, on nvidia-h200 (2026-12-01): the consumers load x before the producer's first copies
# (tools/h200/session7-i-xfirst.patch against 932825b, as in the working tree of the call).
#   bash tools/h200/session7-i.sh
exec bash tools/h200/tma_change_check.sh i session7-i-xfirst.patch
