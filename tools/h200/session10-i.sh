#!/usr/bin/env bash
# Session 10, call i, on nvidia-h200 (2026-12-01): the recorded sweep's tma genomes measured again (call g's sweep
# timed the kept kernel slower than session 9's while call h's probes, in the sweep's setting, timed it faster), then
# an fp4_matvec campaign on the H200 with the kept kernel, 2.5 minutes, as session 8's call j (sanitizer off for the
# campaign's time: call g ran memcheck and racecheck of this kernel).
#   bash tools/h200/session10-i.sh
set -u
CALL=i SESSION=session10 CHECKS=0 SWEEP=1 bash tools/h200/tma_session_check.sh
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/j; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/fp4_matvec
EVO_SANITIZER=/nonexistent timeout 240 python3 -m evo run configs/fp4_matvec.yaml --minutes 2.5 --attempts 5000 --plain \
    > $R/fp4_matvec-run.txt 2>&1; echo "rc=$?" >> $R/fp4_matvec-run.txt
cp -r logs/fp4_matvec $R/ 2>/dev/null
gzip -9 $R/fp4_matvec/ledger.db 2>/dev/null
grep -v "^#" $R/fp4_matvec-run.txt | tail -n 8
(cd $OUT && tar czf j.tgz j && rm -rf j)
