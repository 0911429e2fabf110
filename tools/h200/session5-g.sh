#!/usr/bin/env bash
# Session 5, call g, on nvidia-h200 (2026-12-01): the GPU tests of the new paths, then a moe_q2_matvec and an
# fp4_matvec campaign on the H200 (the code as committed with this script).
#   bash tools/h200/session5-g.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/g; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; git status --short; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
el "gpu tests" >> $R/timeline.txt
timeout 110 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "mma or baseline" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
for fam in moe_q2_matvec fp4_matvec; do
  el "$fam campaign" >> $R/timeline.txt
  rm -rf logs/$fam
  EVO_SANITIZER=/nonexistent timeout 240 python3 -m evo run configs/$fam.yaml --minutes 2.5 --attempts 5000 --plain \
      > $R/$fam-run.txt 2>&1; echo "rc=$?" >> $R/$fam-run.txt
  cp -r logs/$fam $R/ 2>/dev/null
done
el "done" >> $R/timeline.txt
tail -n 4 $R/pytest-gpu.txt; grep -h "^mma {" $R/pytest-gpu.txt
for fam in moe_q2_matvec fp4_matvec; do grep -v "^#" $R/$fam-run.txt | tail -n 6; done
cat $R/timeline.txt
