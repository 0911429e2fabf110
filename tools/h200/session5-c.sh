#!/usr/bin/env bash
# Session 5, call c, on nvidia-h200 (2026-12-01): moe_q2_matvec x_staging=smem_persistent, first look
# (judged and timed against the sweep's best genome).
#   bash tools/h200/session5-c.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/c; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 400 python3 tools/h200/genome_probe.py configs/moe_q2_matvec.yaml tools/h200/session5-moe-persistent.json 15 > $R/moe-persistent-probe.txt 2>&1
echo "rc=$?" >> $R/moe-persistent-probe.txt
cat $R/moe-persistent-probe.txt
