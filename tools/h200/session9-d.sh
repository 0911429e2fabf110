#!/usr/bin/env bash
# Session 9, call d, on nvidia-h200 (2026-12-01): items land and are released in two halves (two more mbarriers a
# stage: tools/h200/session9-d-half.patch on call c's nosplit kernel, as in the working tree of the call). With 2
# stages the producer could issue item i + 2 only once item i was done, so one item was in flight per SM and the ring
# delivered an item each 2.0 µs while the consumers needed 1.7 (call c's timelines); now the first half of item i + 2
# goes as soon as item i's first half is released. GPU tests, memcheck, racecheck, probes d1 (against the commit
# before, and c's nosplit) and d2 (against #70), timelines at the anchor.
#   bash tools/h200/session9-d.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/d; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
V=/tmp/evo-variants; rm -rf $V; mkdir -p $V/head $V/nosplit
cp candidates/fp4_matvec/kernel.cu $V/nosplit/ && (cd $V/nosplit && git apply -R -p2 --include=kernel.cu "$OLDPWD/tools/h200/session9-d-half.patch") &&
  cp $V/nosplit/kernel.cu $V/head/ && (cd $V/head && git apply -R -p2 "$OLDPWD/tools/h200/session9-c-nosplit.patch" && git apply -R -p3 --include=kernel.cu "$OLDPWD/tools/h200/session9-c-change.patch") || exit 1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for gw in '"rows_per_block":16,"unroll":1,"warps":8' '"rows_per_block":16,"unroll":2,"warps":2' '"rows_per_block":16,"unroll":4,"warps":4'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
      "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,$gw}" in7168_out18432 1 >> $R/memcheck-tma.txt 2>&1
  echo "rc=$? $gw" >> $R/memcheck-tma.txt
done
for gw in '"rows_per_block":16,"unroll":1,"warps":8' '"rows_per_block":16,"unroll":4,"warps":4'; do
  timeout 90 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
      "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,$gw}" in4096_out4096 1 >> $R/racecheck-tma.txt 2>&1
  echo "rc=$? $gw" >> $R/racecheck-tma.txt
done
for p in d1 d2; do
  timeout 200 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session9-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
GEO=in7168_out18432
for v in half:candidates/fp4_matvec/kernel.cu nosplit:$V/nosplit/kernel.cu; do
  python3 tools/h200/timeline.py stamp ${v#*:} $V/stamped-${v%%:*}.cu || exit 1
done
for t in half:1 half:2 nosplit:1; do
  timeout 60 python3 tools/h200/timeline.py configs/fp4_matvec.yaml tools/h200/session9-g8u${t#*:}.json $GEO \
      $V/stamped-${t%%:*}.cu $R/timeline-${t%%:*}-u${t#*:}.json.gz > $R/timeline-${t%%:*}-u${t#*:}.txt 2>&1
  echo "rc=$?" >> $R/timeline-${t%%:*}-u${t#*:}.txt
done
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck-tma.txt $R/racecheck-tma.txt
for p in d1 d2; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 20; done
for f in $R/timeline-*.txt; do echo "== $f"; head -n 14 $f; done
(cd $OUT && tar czf d.tgz d && rm -rf d)
