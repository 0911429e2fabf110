#!/usr/bin/env bash
# Session 4, call a, on nvidia-h200-x2 (2026-11-30). Results in $OUT/a.tgz.
#  GPU 0: GPU tests (fp4 incl. expand=mma, the ideas' wrong-result verdict), then the full fp4_matvec sweep,
#         then an fp4_matvec campaign.
#  GPU 1: ncu of the fp4 champion of session 3 and of two expand=mma genomes, then the full moe_q2_matvec sweep.
#  CPU:   NVRTC for both sweeps ahead of them.
#   bash tools/h200/session4-a.sh
set -u
# files other work had open in this tree: the committed versions (the device copy only)
git checkout -q b67bf2b -- evo/campaign.py evo/ledger.py evo/workers.py tools/sweep.py tools/search_bench.py \
    evo/proposers/optuna_samplers.py 2>/dev/null || echo "git checkout of the committed files failed"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/a; mkdir -p $R
pack() { tar czf $OUT/a.tgz -C $OUT a 2>/dev/null; }
{ date -u; git diff --stat b67bf2b 2>/dev/null | tail -1; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
( python3 tools/sweep.py configs/fp4_matvec.yaml --compile-only --jobs 14 > $R/compile-fp4.log 2>&1 ) &
CF=$!
( python3 tools/sweep.py configs/moe_q2_matvec.yaml --compile-only --jobs 14 > $R/compile-moe.log 2>&1 ) &
CM=$!
( export CUDA_VISIBLE_DEVICES=0
  timeout 200 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py tests/test_ideas.py \
      -k "fp4 or wrong_result" > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
  wait $CF 2>/dev/null; while kill -0 $CF 2>/dev/null; do sleep 1; done
  el "fp4 sweep" >> $R/timeline.txt
  python3 tools/sweep.py configs/fp4_matvec.yaml --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 \
      --batch-ms 1 --limit-s 230 --peer off --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$?" >> $R/fp4_matvec-sweep.log
  el "fp4 campaign" >> $R/timeline.txt
  rm -rf logs/fp4_matvec
  EVO_SANITIZER=/nonexistent timeout $(( 560 - ($(date +%s) - T0) )) python3 -m evo run configs/fp4_matvec.yaml \
      --minutes 3 --attempts 5000 --plain > $R/fp4-run.txt 2>&1; echo "rc=$?" >> $R/fp4-run.txt
  cp -r logs/fp4_matvec $R/ 2>/dev/null ) &
G0=$!
( export CUDA_VISIBLE_DEVICES=1
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for spec in 'champ|{"expand":"f16","qload":"words_funnel","row_groups":2,"rows_per_block":8,"warps":2,"unroll":1}' \
              'mma16|{"expand":"mma","qload":"words_funnel","row_groups":1,"rows_per_block":16,"warps":1,"unroll":4}' \
              'mma64|{"expand":"mma","qload":"words_funnel","row_groups":4,"rows_per_block":64,"warps":4,"unroll":1}'; do
    name=${spec%%|*}; g=${spec#*|}
    timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
        --section LaunchStats python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$g" in7168_out18432 3 \
        > $R/ncu-$name.txt 2>&1; echo "rc=$?" >> $R/ncu-$name.txt
  done
  while kill -0 $CM 2>/dev/null; do sleep 1; done
  el "moe sweep" >> $R/timeline.txt
  python3 tools/sweep.py configs/moe_q2_matvec.yaml --out $R/moe_q2_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 \
      --batch-ms 1 --limit-s $(( 555 - ($(date +%s) - T0) )) --peer off --jobs 14 > $R/moe_q2_matvec-sweep.log 2>&1
  echo "rc=$?" >> $R/moe_q2_matvec-sweep.log ) &
G1=$!
while kill -0 $G0 2>/dev/null || kill -0 $G1 2>/dev/null; do sleep 20; pack; done
el "done" >> $R/timeline.txt
tail -n 4 $R/pytest-gpu.txt; grep -h "mma {" $R/pytest-gpu.txt | head; tail -n 3 $R/fp4_matvec-sweep.log $R/moe_q2_matvec-sweep.log
grep -v "^#" $R/fp4-run.txt | tail -n 4
pack
