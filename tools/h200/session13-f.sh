#!/usr/bin/env bash
# Session 13, call f, on nvidia-h200 (2026-12-01): the recorded sweep's tma genomes measured again with the kept
# kernel (call c's first fill; calls c and e checked it: GPU tests, memcheck, racecheck) (f.tgz), then an fp4_matvec
# campaign on the H200, 2.5 minutes, as session 11's call h/i (g.tgz; sanitizer off for the campaign's time).
#   bash tools/h200/session13-f.sh
set -u
CALL=f SESSION=session13 CHECKS=0 SWEEP=1 bash tools/h200/tma_session_check.sh
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/g; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/fp4_matvec
EVO_SANITIZER=/nonexistent timeout 240 python3 -m evo run configs/fp4_matvec.yaml --minutes 2.5 --attempts 5000 --plain \
    > $R/fp4_matvec-run.txt 2>&1; echo "rc=$?" >> $R/fp4_matvec-run.txt
cp -r logs/fp4_matvec $R/ 2>/dev/null
gzip -9 $R/fp4_matvec/ledger.db 2>/dev/null
grep -v "^#" $R/fp4_matvec-run.txt | tail -n 8
grep -h "Copy ceiling" $R/fp4_matvec/*.md | head -2
(cd $OUT && tar czf g.tgz g && rm -rf g)
