#!/usr/bin/env bash
# Session 17, call c, on nvidia-h200 (2026-12-01): session 16's 5-minute PDL campaign (calls s and v: champions at
# 79.0% and 80.0% of the ceiling measured at their start) again, now ending with gates.perf.ceiling_check: the
# champion and the copy ceiling measured alternately 6 times (evo/ceiling.py).
#   bash tools/h200/session17-c.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
MINUTES=5 bash tools/h200/fp4_campaign.sh c configs/fp4_matvec_pdl.yaml
