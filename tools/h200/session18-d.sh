#!/usr/bin/env bash
# Session 18 (2026-12-01): configs/fp4_matvec.yaml (plain launches) for 5 minutes with every part's graph sized for
# itself, beside calls b and c (the same with PDL launches): the plain-launch figure a campaign now reports.
#   bash tools/h200/session18-d.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
MINUTES=5 bash tools/h200/fp4_campaign.sh d configs/fp4_matvec.yaml
