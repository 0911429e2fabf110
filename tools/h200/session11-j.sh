#!/usr/bin/env bash
# Session 11, call j, on nvidia-h200 (2026-12-01): tests/test_gpu.py again after the review's split of
# copy_ceiling's long line (4040c4c, no behaviour change).
#   bash tools/h200/session11-j.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/j; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
tail -n 3 $R/pytest-gpu.txt
