#!/usr/bin/env bash
# Session 5, call h, on nvidia-h200 (2026-12-01): the moe campaign's log of call g as one file (call g's
# files from logs/moe_q2_matvec did not come back: too many files), then the full sweeps of fp4_matvec and
# moe_q2_matvec (the recorded data of both families).
#   bash tools/h200/session5-h.sh
set -u
[ -d logs/moe_q2_matvec ] && tar czf $OUT/g-moe_q2_matvec.tgz logs/moe_q2_matvec
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/h; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; git status --short | head; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
el "fp4 sweep" >> $R/timeline.txt
python3 tools/sweep.py configs/fp4_matvec.yaml --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 \
    --batch-ms 1 --limit-s 190 --peer off --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$?" >> $R/fp4_matvec-sweep.log
el "moe sweep" >> $R/timeline.txt
python3 tools/sweep.py configs/moe_q2_matvec.yaml --out $R/moe_q2_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 \
    --batch-ms 1 --limit-s $(( 560 - ($(date +%s) - T0) )) --peer off --jobs 14 > $R/moe_q2_matvec-sweep.log 2>&1
echo "rc=$?" >> $R/moe_q2_matvec-sweep.log
el "done" >> $R/timeline.txt
tail -n 3 $R/fp4_matvec-sweep.log $R/moe_q2_matvec-sweep.log; cat $R/timeline.txt; ls -la $OUT
