#!/usr/bin/env bash
# Session 8, call b, on nvidia-h200 (2026-12-01): where the time of call a's kernel goes. b1: the kernel against a
# timing variant whose producer copies nothing (tools/h200/session8-b-nocopy.patch, as session 7's e1: the
# consumers alone, data always ready). ncu: per-SASS-instruction execution counts and warp stall samples of the
# 8-warp genome at the anchor (SourceCounters, WarpStateStats; the source page as CSV).
#   bash tools/h200/session8-b.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/b; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/b-nocopy && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/b-nocopy/ &&
  (cd /tmp/evo-variants/b-nocopy && git apply "$OLDPWD/tools/h200/session8-b-nocopy.patch") || exit 1
timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session8-b1.json 12 > $R/probe-b1-nocopy.txt 2>&1
echo "rc=$?" >> $R/probe-b1-nocopy.txt
NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
G='{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}'
timeout 150 $NCUB --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SourceCounters --section WarpStateStats \
    --section SchedulerStats -o $R/src python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$G" in7168_out18432 3 \
    > $R/ncu-src.txt 2>&1; echo "rc=$?" >> $R/ncu-src.txt
timeout 60 $NCUB -i $R/src.ncu-rep --page source --csv --print-source sass > $R/source-sass.csv 2> $R/source-sass.err
echo "rc=$?" >> $R/source-sass.err
timeout 60 $NCUB -i $R/src.ncu-rep --page details > $R/details.txt 2>&1
echo "== b1"; grep -v "^copy" $R/probe-b1-nocopy.txt | tail -n 5
tail -n 3 $R/ncu-src.txt; cat $R/source-sass.err | tail -3; wc -l $R/source-sass.csv; head -c 1500 $R/source-sass.csv
