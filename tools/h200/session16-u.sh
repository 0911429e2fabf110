#!/usr/bin/env bash
# Session 16, call u, on nvidia-h200 (2026-12-01): call q's ceiling probes again, PDL first this time (the tree's
# kernel launched with PDL, then plainly, each alternating with 6 copy-ceiling measurements).
#   bash tools/h200/session16-u.sh
CALL=u SESSION=session16 CHECKS=0 CEIL="tree:1:8:tma:pdl tree:1" exec bash tools/h200/tma_session_check.sh
