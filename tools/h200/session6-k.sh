#!/usr/bin/env bash
# Session 6, call k, on nvidia-h200 (2026-12-01): tools/h200/session6-k.patch (not committed to kernel.cu: qload=tma
# with few consumer warps no longer holding all of x in registers, where call j's campaign hit spills; and a
# one-warp genome in the GPU test): the GPU tests of the fp4 mma paths, memcheck of a one-warp genome, and the
# recorded sweep's 24 tma genomes measured again (tools/sweep.py --resume ... --redo qload=tma; the genomes with up
# to 8 chunks of x a thread have the same SASS as in call i). The sweep's join failed (the recorded file is itself a
# merge; tools/merge_sweeps.resume takes one since), so the patch waits for a sweep.
#   bash tools/h200/session6-k.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/k; mkdir -p $R
git apply tools/h200/session6-k.patch || exit 1  # the change under test, on the device's copy of the tree
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":1}' in7168_out18432 1 \
    > $R/memcheck-tma.txt 2>&1; echo "rc=$?" >> $R/memcheck-tma.txt
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --redo qload=tma --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --peer off \
    --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|rc=" $R/memcheck-tma.txt
grep -h "redo\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; tail -n 9 $R/fp4_matvec-sweep.log
