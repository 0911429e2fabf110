#!/usr/bin/env bash
# Session 8, call h, on nvidia-h200 (2026-12-01): the committed kernel (6c4cd0c) against two timing variants, with
# 2 stages (u1) and 3 (u2): h-nomath, the consumers only wait for each item and release it (the ring alone;
# tools/h200/session8-h-nomath.patch), and h-nocopy, the producer copies nothing (the consumers alone;
# session8-h-nocopy.patch, as b's on this kernel). Why a third stage does not pay: is its ring faster, are its consumers slower?
#   bash tools/h200/session8-h.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/h; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/h-nomath /tmp/evo-variants/h-nocopy
cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/h-nomath/ && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/h-nocopy/ &&
  (cd /tmp/evo-variants/h-nomath && git apply -p2 "$OLDPWD/tools/h200/session8-h-nomath.patch") &&
  (cd /tmp/evo-variants/h-nocopy && git apply -p2 "$OLDPWD/tools/h200/session8-h-nocopy.patch") || exit 1
for v in nomath-u1 nomath-u2 nocopy-u1 nocopy-u2; do
  timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session8-h-$v.json 12 > $R/probe-h-$v.txt 2>&1
  echo "rc=$?" >> $R/probe-h-$v.txt
done
for v in nomath-u1 nomath-u2 nocopy-u1 nocopy-u2; do echo "== $v"; grep -v "^copy" $R/probe-h-$v.txt | tail -n 4; done
