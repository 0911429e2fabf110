#!/usr/bin/env bash
# Session 16, call s, on nvidia-h200 (2026-12-01): call r's PDL campaign for 5 minutes (call r's 2.5 minutes
# ended at champion #60, a 4-warp qload=tma genome, 24.96 µs: the 16-row 8-warp genome was not reached).
#   bash tools/h200/session16-s.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
MINUTES=5 bash tools/h200/fp4_campaign.sh s configs/fp4_matvec_pdl.yaml
