#!/usr/bin/env bash
# Session 5, call a, on nvidia-h200 (2026-12-01): fp4_matvec expand=mma with qload=cp_async, first look.
#   bash tools/h200/session5-a.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/a; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 400 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session5-fp4-mma.json 15 > $R/fp4-mma-probe.txt 2>&1
echo "rc=$?" >> $R/fp4-mma-probe.txt
cat $R/fp4-mma-probe.txt
