#!/usr/bin/env bash
# One device call on nvidia-h200-x2 (2026-11-30, session 3): the three new families' campaigns, side by side.
#   GPU 0: mhc_prenorm_gemm (7 min);  GPU 1: moe_q2_matvec (3.2 min), then fp4_matvec (3.2 min).
#   bash tools/h200/twogpu-b.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-b PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/b; mkdir -p $R $OUT/logs
{ date -u; git log -1 --format='commit %H %s' 2>/dev/null || true; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/mhc_prenorm_gemm logs/moe_q2_matvec logs/fp4_matvec
pack() { cp -r logs/mhc_prenorm_gemm logs/moe_q2_matvec logs/fp4_matvec $OUT/logs/ 2>/dev/null; tar czf $OUT/b.tgz -C $OUT b logs 2>/dev/null; }
camp() {  # family minutes timeout
  timeout $3 python3 -m evo run configs/$1.yaml --minutes $2 --attempts 5000 --plain > $R/$1-run.txt 2>&1
  echo "rc=$?" >> $R/$1-run.txt
  python3 -m evo status configs/$1.yaml > $R/$1-status.txt 2>&1
}
( export CUDA_VISIBLE_DEVICES=0; camp mhc_prenorm_gemm 7 555 ) &
P0=$!
( export CUDA_VISIBLE_DEVICES=1; camp moe_q2_matvec 3.2 270; camp fp4_matvec 3.2 270 ) &
P1=$!
while kill -0 $P0 2>/dev/null || kill -0 $P1 2>/dev/null; do sleep 30; pack; done
wait
for f in mhc_prenorm_gemm moe_q2_matvec fp4_matvec; do el "$f"; grep -v "^#" $R/$f-run.txt | grep -v "warn\|^ *$\|softmax\|Inductor\|PyTorch\|important" | tail -6; done
pack; el "done"
