#!/usr/bin/env bash
# Session 7, call k, on nvidia-h200 (2026-12-01): the int8 tma group loop unrolled by 4 and by 1 instead of 2
# (tools/h200/session7-k-unroll{4,1}.patch, applied in place one after the other) against the committed kernel.
#   bash tools/h200/session7-k.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/k; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/head && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/head/ || exit 1
for n in 4 1; do
  git apply --directory=candidates/fp4_matvec tools/h200/session7-k-unroll$n.patch || exit 1
  timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-k.json 12 > $R/probe-unroll$n.txt 2>&1
  echo "rc=$?" >> $R/probe-unroll$n.txt
  git apply -R --directory=candidates/fp4_matvec tools/h200/session7-k-unroll$n.patch || exit 1
done
for n in 4 1; do echo "== unroll $n"; grep -v "^copy" $R/probe-unroll$n.txt | tail -n 9; done
