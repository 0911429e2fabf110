#!/usr/bin/env bash
# Session 5, call d, on nvidia-h200 (2026-12-01): ncu of the moe_q2_matvec and fp4_matvec sweep champions with
# the warp-stall breakdown, shared-memory wavefronts / bank conflicts and pipe utilization.
#   bash tools/h200/session5-d.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/d; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ST=""
for s in long_scoreboard short_scoreboard mio_throttle lg_throttle barrier math_pipe_throttle wait not_selected selected \
         no_instruction dispatch_stall tex_throttle drain membar branch_resolving imc_miss; do
  ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="smsp__inst_executed.sum,dram__bytes_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum$ST"
run() {  # name config genome geometry
  timeout 120 $NCU --clock-control none -k regex:$5 -s 2 -c 1 --section SpeedOfLight --section Occupancy \
      --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
      --section MemoryWorkloadAnalysis --section LaunchStats --metrics "$M" \
      python3 tools/h200/launch_one.py $2 "$3" $4 3 > $R/ncu-$1.txt 2>&1; echo "rc=$?" >> $R/ncu-$1.txt
}
run moe-champ configs/moe_q2_matvec.yaml '{"codebook":"shared_replicated","load_width":4,"loads_first":false,"row_groups":1,"rows_per_block":8,"warps_per_block":2,"x_staging":"smem_swizzle"}' in7168_k6_E256 moe_q2
run moe-split16x8 configs/moe_q2_matvec.yaml '{"codebook":"split","load_width":4,"loads_first":false,"row_groups":1,"rows_per_block":16,"warps_per_block":8,"x_staging":"smem_swizzle"}' in7168_k6_E256 moe_q2
run fp4-champ configs/fp4_matvec.yaml '{"expand":"f16","qload":"cp_async","row_groups":1,"rows_per_block":8,"unroll":1,"warps":4}' in7168_out18432 fp4_matvec
for f in $R/ncu-*.txt; do echo "== $f"; grep -E "Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Active Warps Per|Registers Per|Achieved Occ|Block Limit (Sh|Reg)|smsp__|l1tex__|dram__bytes|Executed Ipc A|rc=" $f | grep -v " 0$" ; done
