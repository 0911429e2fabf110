#!/usr/bin/env bash
# Session 7, call e, on nvidia-h200 (2026-12-01): where the int8 tma kernel's time goes. e1: the committed kernel
# against a timing variant whose producer copies nothing (tools/h200/session7-e-nocopy.patch: the consumers compute
# on whatever the ring holds: their time alone, data always ready). e2: a variant whose tile end has no consumer
# barrier (tools/h200/session7-e-nobarrier.patch: the tile's last warp sums its rows; applied in place, so the GPU
# correctness checks run on it) against the committed kernel.
#   bash tools/h200/session7-e.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
variant() { mkdir -p /tmp/evo-variants/$1 && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/$1/ &&
            if [ -n "$2" ]; then (cd /tmp/evo-variants/$1 && git apply "$OLDPWD/tools/h200/$2"); fi; }
R=$OUT/e; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
variant e-nocopy session7-e-nocopy.patch || exit 1
variant committed "" || exit 1
timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-e1.json 12 > $R/probe-e1-nocopy.txt 2>&1
echo "rc=$?" >> $R/probe-e1-nocopy.txt
git apply --directory=candidates/fp4_matvec tools/h200/session7-e-nobarrier.patch || exit 1
timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-e2.json 12 > $R/probe-e2-nobarrier.txt 2>&1
echo "rc=$?" >> $R/probe-e2-nobarrier.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 60 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in4096_out4096 1 \
    > $R/racecheck-nobarrier.txt 2>&1; echo "rc=$?" >> $R/racecheck-nobarrier.txt
for f in e1-nocopy e2-nobarrier; do echo "== $f"; grep -v "^copy" $R/probe-$f.txt | tail -n 5; done
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/racecheck-nobarrier.txt | tail -3
