#!/usr/bin/env bash
# Session 5, call b, on nvidia-h200 (2026-12-01): fp4_matvec expand=mma with qload=cp_async, after the branch-free scale (e8m0 selects) and a non-volatile mma asm.
#   bash tools/h200/session5-b.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/b; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 400 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session5-fp4-mma-b.json 15 > $R/fp4-mma-probe.txt 2>&1
echo "rc=$?" >> $R/fp4-mma-probe.txt
cat $R/fp4-mma-probe.txt
# ncu of the best expand=mma, qload=cp_async genome of call a, after the change
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
    --section LaunchStats python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"cp_async","row_groups":4,"rows_per_block":32,"warps":8,"unroll":1}' in7168_out18432 3 \
    > $R/ncu-mma32.txt 2>&1; echo "rc=$?" >> $R/ncu-mma32.txt
grep -E "Duration|Throughput|Issue Slots|Eligible|Active Warps|Achieved Occ|Registers|Stall|Theoretical Occ|Block Limit" $R/ncu-mma32.txt | head -40
