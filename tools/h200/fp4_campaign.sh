#!/usr/bin/env bash
# An fp4_matvec campaign on the H200 after a call's checks: 2.5 minutes, the sanitizer off for its time (the call's
# checks run memcheck and racecheck of the kernel), its output, attempt log and gzipped ledger in $OUT/DIR.tgz.
# Expects the wheels installed in /tmp/site, as tools/h200/tma_session_check.sh leaves them. (Sessions 10, 11 and 13
# ran these lines inline in their call scripts; this form also names the card in device.txt.)
#   bash tools/h200/fp4_campaign.sh DIR
set -u
DIR=${1:?a folder name under \$OUT}
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/$DIR; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/fp4_matvec
EVO_SANITIZER=/nonexistent timeout 240 python3 -m evo run configs/fp4_matvec.yaml --minutes 2.5 --attempts 5000 --plain \
    > $R/fp4_matvec-run.txt 2>&1; echo "rc=$?" >> $R/fp4_matvec-run.txt
cp -r logs/fp4_matvec $R/ 2>/dev/null
gzip -9 $R/fp4_matvec/ledger.db 2>/dev/null
grep -v "^#" $R/fp4_matvec-run.txt | tail -n 8
grep -h "Copy ceiling" $R/fp4_matvec/*.md | head -2
(cd $OUT && tar czf $DIR.tgz $DIR && rm -rf $DIR)
