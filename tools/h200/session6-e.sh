#!/usr/bin/env bash
# Session 6, call e, on nvidia-h200 (2026-12-01): the recorded fp4_matvec sweep redone over the grown space (qload
# gained tma: 1586 + 24 valid genomes; a new knob value changes the seeded order, so --resume cannot extend the old
# file). Continue a time-limited run with tools/sweep.py --resume.
#   bash tools/h200/session6-e.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/e; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
python3 tools/sweep.py configs/fp4_matvec.yaml --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 \
    --batch-ms 1 --limit-s 430 --peer off --jobs 14 > $R/fp4_matvec-sweep.log 2>&1
echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
grep -h "compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; tail -n 3 $R/fp4_matvec-sweep.log
