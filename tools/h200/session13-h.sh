#!/usr/bin/env bash
# Session 13, call h, on nvidia-h200 (2026-12-01): the recorded sweep's tma genomes measured again (call f's sweep read
# every 8-warp tma genome 6-12% slower than session 11's, the 3-stage ones too, which call c's change leaves as they
# were, while the campaign after it read the champion as the probes do).
#   bash tools/h200/session13-h.sh
CALL=h SESSION=session13 CHECKS=0 SWEEP=1 exec bash tools/h200/tma_session_check.sh
