#!/usr/bin/env bash
# Session 11, call d, on nvidia-h200 (2026-12-01): items of half rows with x's B in registers (session11-d-h.patch:
# TXREG where items are 2 steps of K; unroll = 4 makes such items, a ring of 4 of the 5 stages that fit: h, of 3: h3,
# of 5: h5) beside the working tree's kernel (d1); timeline of h at the anchor; the copy ceiling as the harness now
# measures it (best of 3 trials of 4 GiB) and as before (1 GiB once), alternating with the working tree's kernel,
# 6 trials; the GPU test of the new copy_ceiling.
#   bash tools/h200/session11-d.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p $OUT/d
PYTHONPATH=/tmp/site:$PWD timeout 120 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu.py \
  -k copy_ceiling > $OUT/d/pytest-ceiling.txt 2>&1; echo "rc=$?" >> $OUT/d/pytest-ceiling.txt; tail -n 2 $OUT/d/pytest-ceiling.txt
CALL=d SESSION=session11 CHECKS=0 VARIANTS="h=session11-d-h.patch h3=session11-d-h.patch,session11-d-h3.patch h5=session11-d-h.patch,session11-d-h5.patch" \
  TIMELINES="h:4 tree:1" CEIL="tree:1" exec bash tools/h200/tma_session_check.sh
