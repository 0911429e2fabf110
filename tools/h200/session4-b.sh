#!/usr/bin/env bash
# Session 4, call b, on nvidia-h200-x2 (2026-11-30). Results in $OUT/b.tgz.
#  GPU 0: the complete mhc_prenorm_gemm sweep (every valid genome; 4 interleaved rounds each).
#  GPU 1: compute-sanitizer (memcheck, racecheck) on call a's fp4_matvec champion #21; the fp4 GPU tests.
#  CPU:   NVRTC for the sweep ahead of it (28 processes).
#   bash tools/h200/session4-b.sh
set -u
git checkout -q b67bf2b -- tools/sweep.py 2>/dev/null || echo "git checkout of tools/sweep.py failed"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-b PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/b; mkdir -p $R
pack() { tar czf $OUT/b.tgz -C $OUT b 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
( export CUDA_VISIBLE_DEVICES=0
  python3 tools/sweep.py configs/mhc_prenorm_gemm.yaml --compile-only --jobs 28 > $R/compile-prenorm.log 2>&1
  el "prenorm sweep" >> $R/timeline.txt
  python3 tools/sweep.py configs/mhc_prenorm_gemm.yaml --out $R/mhc_prenorm_gemm-h200-sweep.json.gz --rounds 4 \
      --aa-rounds 40 --batch-ms 1 --limit-s $(( 570 - ($(date +%s) - T0) )) --peer off --jobs 28 \
      > $R/mhc_prenorm_gemm-sweep.log 2>&1; echo "rc=$?" >> $R/mhc_prenorm_gemm-sweep.log ) &
G0=$!
( export CUDA_VISIBLE_DEVICES=1
  mkdir -p logs/fp4_matvec && cp logs/h200/2026-11-30-session4/a/fp4_matvec/ledger.db logs/fp4_matvec/ledger.db
  timeout 200 python3 -m evo sanitize configs/fp4_matvec.yaml > $R/fp4-sanitize.txt 2>&1; echo "rc=$?" >> $R/fp4-sanitize.txt
  timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4" > $R/pytest-gpu.txt 2>&1
  echo "rc=$?" >> $R/pytest-gpu.txt ) &
G1=$!
while kill -0 $G0 2>/dev/null || kill -0 $G1 2>/dev/null; do sleep 20; pack; done
el "done" >> $R/timeline.txt
tail -n 4 $R/fp4-sanitize.txt $R/pytest-gpu.txt; grep -h "mma {" $R/pytest-gpu.txt; grep -E "complete|limit" $R/mhc_prenorm_gemm-sweep.log; tail -n 8 $R/mhc_prenorm_gemm-sweep.log
pack
