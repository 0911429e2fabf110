#!/usr/bin/env bash
# Session 8, call f, on nvidia-h200 (2026-12-01): two changes on the committed kernel, as in the working tree of the
# call: the weights' bulk copies with an L2 evict_first policy (call e), and K steps as even as 16-block units allow
# (family.py tma_step_blocks: 5 stages at in=7168 now 112 + 112 blocks, not 144 + 80) with a tile's groups
# round-robin across its steps (kernel.cu tma_first_group; tools/h200/session8-f-kernel.patch and
# session8-f-family.patch). GPU tests, memcheck, racecheck; probes f1 against the committed kernel, f2 against #70;
# the recorded sweep's tma genomes measured again.
#   bash tools/h200/session8-f.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/f; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/f-before && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/f-before/ &&
  (cd /tmp/evo-variants/f-before && git apply -R -p2 "$OLDPWD/tools/h200/session8-f-kernel.patch") || exit 1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for gw in '"rows_per_block":16,"unroll":1,"warps":8' '"rows_per_block":16,"unroll":4,"warps":8' '"rows_per_block":16,"unroll":2,"warps":2'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
      "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,$gw}" in7168_out18432 1 >> $R/memcheck-tma.txt 2>&1
  echo "rc=$? $gw" >> $R/memcheck-tma.txt
done
timeout 90 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in4096_out4096 1 \
    > $R/racecheck-tma.txt 2>&1; echo "rc=$?" >> $R/racecheck-tma.txt
for p in f1 f2; do
  timeout 150 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session8-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --redo qload=tma --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --peer off \
    --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
tail -n 2 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck-tma.txt $R/racecheck-tma.txt
for p in f1 f2; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 12; done
grep -h "redo\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; tail -n 9 $R/fp4_matvec-sweep.log
