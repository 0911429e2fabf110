#!/usr/bin/env bash
# Session 4, call c, on nvidia-h200-x2 (2026-11-30): attempts per hour of one `evo worker` against two, with
# proposals reserved in the ledger when proposed (evo/workers.py). Same config, fresh campaigns, 2 min each.
#  phase 1: one worker on GPU 0 (GPU 1: the GPU tests of the fp4 expand=mma path);
#  phase 2: two workers, one per GPU, on one SQLite ledger.
#   bash tools/h200/session4-c.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-c PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/c; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/mhc_pre_1w logs/mhc_pre_2w
for c in 1w 2w; do sed -e "s/^campaign: mhc_pre_big_fuse/campaign: mhc_pre_$c/" configs/mhc_pre_big_fuse.yaml > configs/mhc_pre_$c.yaml; done
pack() { cp -r logs/mhc_pre_1w logs/mhc_pre_2w $R/ 2>/dev/null; tar czf $OUT/c.tgz -C $OUT c 2>/dev/null; }
el "phase 1: one worker" | tee -a $R/timeline.txt
( CUDA_VISIBLE_DEVICES=0 timeout 220 python3 -m evo worker configs/mhc_pre_1w.yaml --minutes 2 --attempts 5000 > $R/1w-worker.txt 2>&1; echo "rc=$?" >> $R/1w-worker.txt ) &
P0=$!
( CUDA_VISIBLE_DEVICES=1 timeout 200 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4" > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt ) &
P1=$!
wait $P0 $P1; el "phase 1 done" | tee -a $R/timeline.txt; tail -n 3 $R/1w-worker.txt; tail -n 3 $R/pytest-gpu.txt; pack
el "phase 2: two workers" | tee -a $R/timeline.txt
for i in 0 1; do
  ( CUDA_VISIBLE_DEVICES=$i timeout 220 python3 -m evo worker configs/mhc_pre_2w.yaml --minutes 2 --attempts 5000 > $R/2w-worker$i.txt 2>&1; echo "rc=$?" >> $R/2w-worker$i.txt ) &
  sleep 1
done
wait; el "phase 2 done" | tee -a $R/timeline.txt; tail -n 3 $R/2w-worker0.txt $R/2w-worker1.txt
python3 -m evo log configs/mhc_pre_2w.yaml > /dev/null 2>&1; python3 -m evo log configs/mhc_pre_1w.yaml > /dev/null 2>&1
python3 tools/h200/throughput.py mhc_pre_1w mhc_pre_2w > $R/throughput.txt 2>&1
cat $R/throughput.txt; pack
