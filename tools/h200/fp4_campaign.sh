#!/usr/bin/env bash
# An fp4_matvec campaign on the H200 after a call's checks: 2.5 minutes (MINUTES=...), the sanitizer off for its time (the call's
# checks run memcheck and racecheck of the kernel), its output, attempt log and gzipped ledger in $OUT/DIR.tgz.
# Expects the wheels installed in /tmp/site, as tools/h200/tma_session_check.sh leaves them. (Sessions 10, 11 and 13
# ran these lines inline in their call scripts; this form also names the card in device.txt.)
#   bash tools/h200/fp4_campaign.sh DIR [CONFIG]   (configs/fp4_matvec.yaml unless given; its campaign's logs folder)
set -u
DIR=${1:?a folder name under \$OUT} CFG=${2:-configs/fp4_matvec.yaml}
NAME=$(sed -n 's/^campaign: *//p' $CFG)
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/$DIR; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf logs/$NAME
M=${MINUTES:-2.5}  # the campaign's minutes (its set-up and the log's writing take about a minute more)
EVO_SANITIZER=/nonexistent timeout $(python3 -c "print(int($M * 60 + 90))") python3 -m evo run $CFG --minutes $M --attempts 5000 --plain \
    > $R/fp4_matvec-run.txt 2>&1; echo "rc=$?" >> $R/fp4_matvec-run.txt
cp -r logs/$NAME $R/ 2>/dev/null
gzip -9 $R/$NAME/ledger.db 2>/dev/null
grep -v "^#" $R/fp4_matvec-run.txt | tail -n 8
grep -h "Copy ceiling" $R/$NAME/*.md | head -2
grep -h "against the copy ceiling, side by side" $R/fp4_matvec-run.txt  # (gates.perf.ceiling_check, from session 17)
(cd $OUT && tar czf $DIR.tgz $DIR && rm -rf $DIR)
