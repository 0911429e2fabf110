#!/usr/bin/env bash
# Session 6, call i, on nvidia-h200 (2026-12-01): kernel.cu as committed (call h's "committed" kernel): the GPU
# tests of the fp4 mma paths, memcheck of two tma genomes, and the recorded fp4_matvec sweep with its 24 tma genomes
# measured again (their code changed after call e; the other genomes' SASS is unchanged):
# tools/sweep.py --resume ... --redo qload=tma.
#   bash tools/h200/session6-i.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/i; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
el "gpu tests" >> $R/timeline.txt
timeout 120 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma or baseline" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
el "memcheck" >> $R/timeline.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for G in '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' \
         '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":32,"unroll":4,"warps":2}'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$G" in7168_out18432 2 \
      >> $R/memcheck-tma.txt 2>&1; echo "rc=$?" >> $R/memcheck-tma.txt
done
el "sweep" >> $R/timeline.txt
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --redo qload=tma --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --peer off \
    --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
el "done" >> $R/timeline.txt
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|rc=" $R/memcheck-tma.txt
grep -h "redo\|resuming\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log
tail -n 10 $R/fp4_matvec-sweep.log; cat $R/timeline.txt
