#!/usr/bin/env bash
# One device call (2026-11-30, session 2): GPU tests of every family, then recorded sweeps of the three
# families that had none. Run from the repo root on the H200 with .whl carried; results land in $OUT.
#   bash tools/h200/families.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-families PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
{ date -u; git log -1 --format='commit %H %s' 2>/dev/null || true; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $OUT/device.txt 2>&1
# NVRTC on 12 cores while the GPU tests run: the sweeps then find every cubin in the cache.
( for f in fp4_matvec moe_q2_matvec mhc_prenorm_gemm; do python3 tools/sweep.py configs/$f.yaml --compile-only --jobs 12; done ) > $OUT/compile.log 2>&1 &
CPID=$!
el "pytest -m gpu"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_families.py tests/test_gpu.py tests/test_prenorm_gemm_family.py > $OUT/pytest-gpu.txt 2>&1
el "pytest rc=$?"; tail -3 $OUT/pytest-gpu.txt
wait $CPID; el "compile-ahead done"; tail -4 $OUT/compile.log
sweep() {  # family limit rounds
  el "sweep $1"
  python3 tools/sweep.py configs/$1.yaml --out $OUT/$1-h200-sweep.json.gz --rounds $3 --aa-rounds 40 --batch-ms 1 \
      --limit-s $2 --peer off --jobs 12 > $OUT/$1-sweep.log 2>&1
  el "sweep $1 rc=$?"; tail -6 $OUT/$1-sweep.log
}
sweep fp4_matvec 95 10
sweep moe_q2_matvec 135 10
sweep mhc_prenorm_gemm 165 8
el "done"
