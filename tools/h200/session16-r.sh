#!/usr/bin/env bash
# Session 16, call r, on nvidia-h200 (2026-12-01): a 2.5-minute fp4_matvec campaign under gates.perf.launch: pdl
# (configs/fp4_matvec_pdl.yaml: built with EVO_PDL=1, the qload=tma genomes launched with PDL, the rest plainly).
#   bash tools/h200/session16-r.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
bash tools/h200/fp4_campaign.sh r configs/fp4_matvec_pdl.yaml
