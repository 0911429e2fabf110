#!/usr/bin/env bash
# Session 7, call f, on nvidia-h200 (2026-12-01): item 0 of every block lands in two parts, the consumers starting
# on the first (tools/h200/session7-f-lead.patch against e9a6de2, as in the working tree of the call).
#   bash tools/h200/session7-f.sh
exec bash tools/h200/tma_change_check.sh f session7-f-lead.patch
