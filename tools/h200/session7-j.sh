#!/usr/bin/env bash
# Session 7, call j, on nvidia-h200 (2026-12-01): item 0 in two parts again, now that x is loaded first, with the
# first part a multiple of 16 blocks (whole 16-byte copies; call f's was not) and item 0 peeled off the item loop
# (tools/h200/session7-j-lead.patch against f8c9c19, as in the working tree of the call).
#   bash tools/h200/session7-j.sh
exec bash tools/h200/tma_change_check.sh j session7-j-lead.patch
