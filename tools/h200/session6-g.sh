#!/usr/bin/env bash
# Session 6, call g, on nvidia-h200 (2026-12-01): qload=tma with x read twice (no registers held across the split;
# tools/h200/session6-g.patch) and the E8M0 table, the ring sized for 1 and for 2 resident blocks a SM
# (tools/h200/tma_blocks_probe.py), each timed against champion #70.
#   bash tools/h200/session6-g.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/g; mkdir -p $R
git apply --directory=candidates/fp4_matvec tools/h200/session6-g.patch || exit 1  # that call's kernel (the device's copy)
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
for n in 1 2; do
  timeout 150 python3 tools/h200/tma_blocks_probe.py $n configs/fp4_matvec.yaml tools/h200/session6-g.json 12 \
      > $R/probe-blocks$n.txt 2>&1; echo "rc=$?" >> $R/probe-blocks$n.txt
done
for n in 1 2; do echo "== $n block(s) a SM"; grep -v "^copy" $R/probe-blocks$n.txt | tail -n 17; done
