#!/usr/bin/env bash
# Session 6, call f, on nvidia-h200 (2026-12-01): qload=tma with the E8M0 table in shared memory and the group
# loop unrolled by 2, timed against the call-d loop (tools/h200/session6-d.patch) and against champion #70;
# the GPU tests of the mma paths.
#   bash tools/h200/session6-f.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
# A timing variant: kernel.cu with tools/h200/session6-NAME.patch applied, in /tmp/evo-variants/NAME/kernel.cu.
variant() { mkdir -p /tmp/evo-variants/$1 && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/$1/ &&
            (cd /tmp/evo-variants/$1 && git apply "$OLDPWD/tools/h200/session6-$1.patch"); }
R=$OUT/f; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
variant d
for c in f1 f2; do
  timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-$c.json 12 > $R/probe-$c.txt 2>&1
  echo "rc=$?" >> $R/probe-$c.txt
done
timeout 120 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
for c in f1 f2; do echo "== $c"; grep -v "^copy" $R/probe-$c.txt | tail -n 13; done
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
