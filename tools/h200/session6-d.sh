#!/usr/bin/env bash
# Session 6, call d, on nvidia-h200 (2026-12-01): qload=tma as committed (x split in one pass, whole padded rows
# per step): the GPU tests of the mma paths, memcheck, the probe against champion #70, the nomath timing variant
# again, and the recorded fp4_matvec sweep completed for the 24 new genomes (tools/sweep.py --resume).
#   bash tools/h200/session6-d.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
# A timing variant: kernel.cu with tools/h200/session6-NAME.patch applied, in /tmp/evo-variants/NAME/kernel.cu.
variant() { mkdir -p /tmp/evo-variants/$1 && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/$1/ &&
            (cd /tmp/evo-variants/$1 && git apply "$OLDPWD/tools/h200/session6-$1.patch"); }
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/d; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
el "gpu tests" >> $R/timeline.txt
timeout 120 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma or baseline" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
el "memcheck" >> $R/timeline.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for G in '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' \
         '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":32,"unroll":2,"warps":8}'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$G" in7168_out18432 2 \
      >> $R/memcheck-tma.txt 2>&1; echo "rc=$?" >> $R/memcheck-tma.txt
done
el "probe" >> $R/timeline.txt
timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-fp4-tma-d.json 12 > $R/fp4-probe.txt 2>&1
echo "rc=$?" >> $R/fp4-probe.txt
variant nomath
timeout 80 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-c1.json 10 > $R/probe-nomath.txt 2>&1
echo "rc=$?" >> $R/probe-nomath.txt
el "sweep" >> $R/timeline.txt
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --limit-s 120 --peer off --jobs 14 \
    > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
el "done" >> $R/timeline.txt
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|rc=" $R/memcheck-tma.txt
grep -v "^copy" $R/fp4-probe.txt | tail -n 14; grep -v "^copy" $R/probe-nomath.txt | tail -n 4
grep -h "resuming\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; cat $R/timeline.txt
