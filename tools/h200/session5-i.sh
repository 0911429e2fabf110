#!/usr/bin/env bash
# Session 5, call i, on nvidia-h200 (2026-12-01): the sweeps of call h continued (tools/sweep.py --resume) with
# what was left of the session's device time: fp4_matvec first, then moe_q2_matvec.
#   bash tools/h200/session5-i.sh
set -u
# Only optuna and colorlog (carry .whl-min): the tree with all of .whl is over the device's 64 MiB copy limit,
# and the sweep imports optuna without using its storage (no sqlalchemy).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-min/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/i; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --limit-s 80 --peer off --jobs 14 \
    > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
python3 tools/sweep.py configs/moe_q2_matvec.yaml --resume candidates/moe_q2_matvec/recorded/h200-sweep.json.gz \
    --out $R/moe_q2_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 \
    --limit-s $(( 150 - ($(date +%s) - T0) )) --peer off --jobs 14 > $R/moe_q2_matvec-sweep.log 2>&1
echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/moe_q2_matvec-sweep.log
grep -h "resuming\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/*.log
