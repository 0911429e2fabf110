#!/usr/bin/env bash
# Session 8, call e, on nvidia-h200 (2026-12-01): the weights' bulk copies with an L2 evict_first policy
# (tools/h200/session8-e-evictfirst.patch against the committed kernel, as in the working tree of the call), so that
# x is not pushed out of L2 by the weights between launches (call d: x's set-up costs 1.65 µs of the kernel).
# GPU tests, memcheck; probes e1 against the kernel before, e2 against champion #70.
#   bash tools/h200/session8-e.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/e; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/e-before && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/e-before/ &&
  (cd /tmp/evo-variants/e-before && git apply -R -p2 "$OLDPWD/tools/h200/session8-e-evictfirst.patch") || exit 1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in7168_out18432 1 \
    > $R/memcheck-tma.txt 2>&1; echo "rc=$?" >> $R/memcheck-tma.txt
for p in e1 e2; do
  timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session8-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
tail -n 2 $R/pytest-gpu.txt; grep -h "ERROR SUMMARY\|rc=" $R/memcheck-tma.txt
for p in e1 e2; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 8; done
