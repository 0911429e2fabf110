#!/usr/bin/env bash
# Session 6, call c, on nvidia-h200 (2026-12-01): where qload=tma's time goes. The same genome timed side by side
# against two timing variants of kernel.cu (tools/h200/session6-{nomath,nodecode}.patch): consumers that only
# wait and release each item (the ring's own streaming rate, at 2, 3 and 5 stages), and consumers without the
# E2M1 decode (the decode's share).
#   bash tools/h200/session6-c.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
# A timing variant: kernel.cu with tools/h200/session6-NAME.patch applied, in /tmp/evo-variants/NAME/kernel.cu.
variant() { mkdir -p /tmp/evo-variants/$1 && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/$1/ &&
            (cd /tmp/evo-variants/$1 && git apply "$OLDPWD/tools/h200/session6-$1.patch"); }
R=$OUT/c; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
variant nomath; variant nodecode
for c in c1 c2 c3 c4; do
  timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-$c.json 10 > $R/probe-$c.txt 2>&1
  echo "rc=$?" >> $R/probe-$c.txt
done
for c in c1 c2 c3 c4; do echo "== $c"; grep -v "^copy" $R/probe-$c.txt | tail -n 5; done
