#!/usr/bin/env bash
# Session 7, call a, on nvidia-h200 (2026-12-01): qload=tma with 16 consumer warps per 16-row tile (warps=16, outside
# the knob's range: a probe) against champion #70, beside the committed best (8 warps); ncu of the 16-warp genome.
#   bash tools/h200/session7-a.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/a; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 200 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-a.json 12 > $R/probe.txt 2>&1
echo "rc=$?" >> $R/probe.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ST=""
for s in long_scoreboard short_scoreboard mio_throttle barrier math_pipe_throttle wait not_selected selected \
         no_instruction dispatch_stall branch_resolving sleeping; do
  ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="smsp__inst_executed.sum,sm__inst_executed_pipe_alu.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed$ST"
timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section SchedulerStats \
    --metrics "$M" python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":16}' in7168_out18432 3 \
    > $R/ncu-w16.txt 2>&1; echo "rc=$?" >> $R/ncu-w16.txt
grep -v "^copy" $R/probe.txt | tail -n 20
grep -E "Duration|Issued Warp|Eligible|smsp__|sm__|l1tex__|rc=" $R/ncu-w16.txt | grep -v " 0$"
