#!/usr/bin/env bash
# Session 9, call a, on nvidia-h200 (2026-12-01): timelines of the tma kernel at the anchor (tools/h200/timeline.py
# with tools/h200/session9-timeline.patch): the 8-warp genome with 2, 3 and 5 stages, and with 2 and 3 stages the
# timing variants without copies (session9-nocopy.patch) and without math (session9-nomath.patch); then the
# stamped kernel beside the committed one (does stamping change the time?).
#   bash tools/h200/session9-a.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/a; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
V=/tmp/evo-variants; mkdir -p $V/timeline $V/nocopy $V/nomath
cp candidates/fp4_matvec/kernel.cu $V/timeline/ && (cd $V/timeline && git apply -p2 "$OLDPWD/tools/h200/session9-timeline.patch") &&
  cp $V/timeline/kernel.cu $V/nocopy/ && (cd $V/nocopy && git apply -p2 "$OLDPWD/tools/h200/session9-nocopy.patch") &&
  cp $V/timeline/kernel.cu $V/nomath/ && (cd $V/nomath && git apply -p2 "$OLDPWD/tools/h200/session9-nomath.patch") || exit 1
GEO=in7168_out18432
for u in 1 2 4; do
  timeout 60 python3 tools/h200/timeline.py configs/fp4_matvec.yaml tools/h200/session9-g8u$u.json $GEO \
      $V/timeline/kernel.cu $R/timeline-u$u.json.gz > $R/timeline-u$u.txt 2>&1; echo "rc=$?" >> $R/timeline-u$u.txt
done
for v in nocopy nomath; do for u in 1 2; do
  timeout 60 python3 tools/h200/timeline.py configs/fp4_matvec.yaml tools/h200/session9-g8u$u.json $GEO \
      $V/$v/kernel.cu $R/timeline-$v-u$u.json.gz > $R/timeline-$v-u$u.txt 2>&1; echo "rc=$?" >> $R/timeline-$v-u$u.txt
done; done
timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session9-a1.json 12 > $R/probe-a1.txt 2>&1
echo "rc=$?" >> $R/probe-a1.txt
for f in $R/timeline-*.txt; do echo "== $f"; cat $f; done
grep -v "^copy" $R/probe-a1.txt | tail -n 5
