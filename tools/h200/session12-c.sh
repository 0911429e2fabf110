#!/usr/bin/env bash
# Session 12, call c, on nvidia-h200 (2026-12-01): the fp4 ring alone by copy size and kind
# (tools/h200/tma_copy_probe.py): call b's items of 16 x 544 bytes were 2.2x slower; is it the count of bulk copies?
#   bash tools/h200/session12-c.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
mkdir -p $OUT/c
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $OUT/c/device.txt 2>&1
timeout 300 python3 tools/h200/tma_copy_probe.py configs/fp4_matvec.yaml 2>&1 | tee $OUT/c/tma-copy.txt
echo "rc=${PIPESTATUS[0]}" | tee -a $OUT/c/tma-copy.txt
