#!/usr/bin/env bash
# Session 6, call h, on nvidia-h200 (2026-12-01): kernel.cu as committed (x split from registers in one pass, the
# E8M0 table, the tma group loop unrolled by 2) and a variant with the loop unrolled by 4
# (tools/h200/session6-h-unroll4.patch, applied to the device's copy of kernel.cu), each timed against champion #70;
# ncu of the committed kernel.
#   bash tools/h200/session6-h.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/h; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-h.json 12 > $R/probe-committed.txt 2>&1
echo "rc=$?" >> $R/probe-committed.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ST=""
for s in long_scoreboard short_scoreboard mio_throttle barrier math_pipe_throttle wait not_selected selected \
         no_instruction dispatch_stall branch_resolving; do
  ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="smsp__inst_executed.sum,dram__bytes_read.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_lsu.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed$ST"
timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section SchedulerStats \
    --metrics "$M" python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in7168_out18432 3 \
    > $R/ncu-committed.txt 2>&1; echo "rc=$?" >> $R/ncu-committed.txt
git apply --directory=candidates/fp4_matvec tools/h200/session6-h-unroll4.patch || exit 1
timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-h.json 12 > $R/probe-unroll4.txt 2>&1
echo "rc=$?" >> $R/probe-unroll4.txt
for f in committed unroll4; do echo "== $f"; grep -v "^copy" $R/probe-$f.txt | tail -n 13; done
grep -E "Duration|Issued Warp|smsp__|sm__|l1tex__|dram__|rc=" $R/ncu-committed.txt | grep -v " 0$"
