#!/usr/bin/env bash
# One device call on nvidia-h200-x2 (2026-11-30, session 3). Results land in $OUT.
#  phase 1, side by side:  GPU 0: the mhc_pre_big_fuse campaign, one process (A/A floor, speedup, throughput);
#                          GPU 1: GPU tests of fp4_matvec and moe_q2_matvec (new code paths), then the ideas campaign.
#  phase 2: two `evo worker`s (GPU 0 and GPU 1) share one fresh mhc_pre_big_fuse campaign for as long as
#           phase 1's one process ran: attempts per hour of two GPUs against one.
#   bash tools/h200/twogpu-a.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-a PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/a; mkdir -p $R
{ date -u; git log -1 --format='commit %H %s' 2>/dev/null || true; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; which compute-sanitizer; nproc; } > $R/device.txt 2>&1
rm -rf logs/mhc_pre_big_fuse logs/mhc_pre_ideas logs/mhc_pre_2w
pack() { tar czf $OUT/a.tgz -C $OUT a logs 2>/dev/null; }
mkdir -p $OUT/logs
sed -e 's/^campaign: mhc_pre_big_fuse/campaign: mhc_pre_2w/' configs/mhc_pre_big_fuse.yaml > configs/mhc_pre_2w.yaml
el "phase 1"
( CUDA_VISIBLE_DEVICES=0 timeout 300 python3 -m evo run configs/mhc_pre_big_fuse.yaml --minutes 2.5 --attempts 5000 --plain > $R/mhc_pre-run.txt 2>&1; echo "rc=$?" >> $R/mhc_pre-run.txt ) &
P0=$!
( export CUDA_VISIBLE_DEVICES=1
  timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "moe or fp4" > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
  timeout 240 python3 -m evo run configs/mhc_pre_ideas.yaml --minutes 2.5 --attempts 5000 --plain > $R/ideas-run.txt 2>&1; echo "rc=$?" >> $R/ideas-run.txt ) &
P1=$!
wait $P0; el "mhc_pre done"; grep -v "^#" $R/mhc_pre-run.txt | tail -8
wait $P1; el "gpu1 done"; tail -3 $R/pytest-gpu.txt; grep -v "^#" $R/ideas-run.txt | tail -5
cp -r logs/mhc_pre_big_fuse logs/mhc_pre_ideas $OUT/logs/ 2>/dev/null; pack
el "phase 2: two workers"
for i in 0 1; do
  ( CUDA_VISIBLE_DEVICES=$i timeout 260 python3 -m evo worker configs/mhc_pre_2w.yaml --minutes 2.5 --attempts 5000 > $R/worker$i.txt 2>&1; echo "rc=$?" >> $R/worker$i.txt ) &
  sleep 1
done
wait; el "workers done"; tail -n 3 $R/worker0.txt $R/worker1.txt
python3 -m evo status configs/mhc_pre_2w.yaml > $R/2w-status.txt 2>&1
python3 -m evo log configs/mhc_pre_2w.yaml > /dev/null 2>&1
python3 -m evo status configs/mhc_pre_big_fuse.yaml > $R/mhc_pre-status.txt 2>&1
cp -r logs/mhc_pre_big_fuse logs/mhc_pre_ideas logs/mhc_pre_2w $OUT/logs/ 2>/dev/null; pack
el "done"
