#!/usr/bin/env bash
# Session 7, call g, on nvidia-h200 (2026-12-01): an fp4_matvec campaign on the H200 with the int8 tma path (commit
# e9a6de2's code), 2.5 minutes, as session 6's call j ran it (sanitizer off for the campaign's time), and racecheck
# of the committed tma kernel.
#   bash tools/h200/session7-g.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/g; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 90 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in4096_out4096 1 \
    > $R/racecheck-tma.txt 2>&1; echo "rc=$?" >> $R/racecheck-tma.txt
rm -rf logs/fp4_matvec
EVO_SANITIZER=/nonexistent timeout 240 python3 -m evo run configs/fp4_matvec.yaml --minutes 2.5 --attempts 5000 --plain \
    > $R/fp4_matvec-run.txt 2>&1; echo "rc=$?" >> $R/fp4_matvec-run.txt
cp -r logs/fp4_matvec $R/ 2>/dev/null
gzip -9 $R/fp4_matvec/ledger.db 2>/dev/null
grep -h "RACECHECK SUMMARY\|rc=" $R/racecheck-tma.txt
grep -v "^#" $R/fp4_matvec-run.txt | tail -n 8
grep -c "accepted" $R/fp4_matvec/attempts.md; grep "tma" $R/fp4_matvec/attempts.md | head -20
