#!/usr/bin/env bash
# Session 8, call j, on nvidia-h200 (2026-12-01): an fp4_matvec campaign on the H200 with commit a0e9e26's code (the
# tma path's mma of 8 rows x 2 blocks, even K steps), 2.5 minutes, as session 7's call g ran it (sanitizer off for
# the campaign's time: call i ran memcheck and racecheck of this kernel).
#   bash tools/h200/session8-j.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/j; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/fp4_matvec
EVO_SANITIZER=/nonexistent timeout 240 python3 -m evo run configs/fp4_matvec.yaml --minutes 2.5 --attempts 5000 --plain \
    > $R/fp4_matvec-run.txt 2>&1; echo "rc=$?" >> $R/fp4_matvec-run.txt
cp -r logs/fp4_matvec $R/ 2>/dev/null
gzip -9 $R/fp4_matvec/ledger.db 2>/dev/null
grep -v "^#" $R/fp4_matvec-run.txt | tail -n 8
grep -c "accepted" $R/fp4_matvec/attempts.md; grep "tma" $R/fp4_matvec/attempts.md | head -20
