#!/usr/bin/env bash
# Session 17, call d, on nvidia-h200 (2026-12-01): call c's 5-minute PDL campaign again with gates.perf.watched_slack:
# 0.02 (call c kept a 32-row 4-warp champion, 7.27x, and rejected the 16-row 8-warp genome, 8.79x at the anchor, for
# 0.988x at the watched in4096_out4096); it ends with the champion against the copy ceiling, alternately.
#   bash tools/h200/session17-d.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
MINUTES=5 bash tools/h200/fp4_campaign.sh d configs/fp4_matvec_pdl.yaml
