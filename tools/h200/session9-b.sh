#!/usr/bin/env bash
# Session 9, call b, on nvidia-h200 (2026-12-01): after call a's timelines, two changes of the tma kernel: the ring's
# first fill one item at a time (item 0 landed 4.0 µs after the block's start, with item 1 issued beside it), and the
# tile end off the consumers' path (the producer warp sums the warps' partials and writes y; the consumers'
# barrier and sum took 0.27 of each 2.03 µs item). The working tree has both; session9-b-v1only.patch (on the
# commit before) and session9-b-v2only.patch (on the working tree) give each alone.
# GPU tests of the fp4 mma genomes, memcheck of two tma genomes, racecheck of one; probes b1 (each against the
# commit before, at every geometry) and b2 (against #70); timelines at the anchor.
#   bash tools/h200/session9-b.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/b; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
V=/tmp/evo-variants; mkdir -p $V/head $V/v1only $V/v2only
cp candidates/fp4_matvec/kernel.cu $V/head/ && (cd $V/head && git apply -R -p3 --include=kernel.cu "$OLDPWD/tools/h200/session9-b-change.patch") &&
  cp $V/head/kernel.cu $V/v1only/ && (cd $V/v1only && git apply -p2 "$OLDPWD/tools/h200/session9-b-v1only.patch") &&
  cp candidates/fp4_matvec/kernel.cu $V/v2only/ && (cd $V/v2only && git apply -p2 "$OLDPWD/tools/h200/session9-b-v2only.patch") || exit 1
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
for p in b1 b2; do
  timeout 200 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session9-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
GEO=in7168_out18432
for v in new:candidates/fp4_matvec/kernel.cu v1only:$V/v1only/kernel.cu v2only:$V/v2only/kernel.cu; do
  python3 tools/h200/timeline.py stamp ${v#*:} $V/stamped-${v%%:*}.cu || exit 1
done
for t in new:1 new:2 new:4 v1only:1 v2only:1; do
  timeout 60 python3 tools/h200/timeline.py configs/fp4_matvec.yaml tools/h200/session9-g8u${t#*:}.json $GEO \
      $V/stamped-${t%%:*}.cu $R/timeline-${t%%:*}-u${t#*:}.json.gz > $R/timeline-${t%%:*}-u${t#*:}.txt 2>&1
  echo "rc=$?" >> $R/timeline-${t%%:*}-u${t#*:}.txt
done
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck-tma.txt $R/racecheck-tma.txt
for p in b1 b2; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 20; done
for f in $R/timeline-*.txt; do echo "== $f"; head -n 14 $f; done
(cd $OUT && tar czf b.tgz b && rm -rf b)
