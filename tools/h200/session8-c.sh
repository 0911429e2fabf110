#!/usr/bin/env bash
# Session 8, call c, on nvidia-h200 (2026-12-01): two changes on call a's kernel, as in the working tree of the call:
# the quad's 4 scales of a block pair by one table lookup a lane and 4 shuffles (tools/h200/session8-c-shfl.patch)
# and each item landing in two parts on two mbarriers, the consumers starting on part A's groups
# (tools/h200/session8-c-split.patch). GPU tests, memcheck of two tma genomes, racecheck of one; probes: c1 against
# the kernel without the split, c2 against call a's kernel, c3 against champion #70.
#   bash tools/h200/session8-c.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/c; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/c-shfl /tmp/evo-variants/c-a
cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/c-shfl/ &&
  (cd /tmp/evo-variants/c-shfl && git apply -R -p2 "$OLDPWD/tools/h200/session8-c-split.patch") &&
  cp /tmp/evo-variants/c-shfl/kernel.cu /tmp/evo-variants/c-a/ &&
  (cd /tmp/evo-variants/c-a && git apply -R -p2 "$OLDPWD/tools/h200/session8-c-shfl.patch") || exit 1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for gw in '"rows_per_block":16,"unroll":1,"warps":8' '"rows_per_block":16,"unroll":2,"warps":2'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
      "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,$gw}" in7168_out18432 1 >> $R/memcheck-tma.txt 2>&1
  echo "rc=$? $gw" >> $R/memcheck-tma.txt
done
timeout 90 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in4096_out4096 1 \
    > $R/racecheck-tma.txt 2>&1; echo "rc=$?" >> $R/racecheck-tma.txt
for p in c1 c2 c3; do
  timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session8-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck-tma.txt $R/racecheck-tma.txt
for p in c1 c2 c3; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 8; done
