#!/usr/bin/env bash
# Session 4, call e, on nvidia-h200-x2 (2026-11-30).
#  GPU 0: tools/h200/fp4_probe.py (L2 prefetch / L2::256B hint variants of fp4 words_funnel genomes);
#  GPU 1: every gpu-marked test (the code as committed, after the worker and surrogate changes).
#   bash tools/h200/session4-e.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-e PYTHONUNBUFFERED=1
R=$OUT/e; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
( CUDA_VISIBLE_DEVICES=0 timeout 420 python3 tools/h200/fp4_probe.py configs/fp4_matvec.yaml 20 > $R/fp4-probe.txt 2>&1; echo "rc=$?" >> $R/fp4-probe.txt ) &
( CUDA_VISIBLE_DEVICES=1 timeout 450 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/ > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt ) &
wait
tail -n 5 $R/pytest-gpu.txt; cat $R/fp4-probe.txt
