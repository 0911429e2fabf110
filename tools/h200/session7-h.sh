#!/usr/bin/env bash
# Session 7, call h, on nvidia-h200 (2026-12-01): how much of the committed int8 tma kernel's time is x's split
# (the start): the kernel against a timing variant without it (tools/h200/session7-h-nosplit.patch; wrong y),
# 2 stages (h1) and 3 (h2).
#   bash tools/h200/session7-h.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/h; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/h-nosplit && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/h-nosplit/ &&
  (cd /tmp/evo-variants/h-nosplit && git apply "$OLDPWD/tools/h200/session7-h-nosplit.patch") || exit 1
for p in h1 h2; do
  timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
for p in h1 h2; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 5; done
