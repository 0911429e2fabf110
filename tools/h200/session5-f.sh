#!/usr/bin/env bash
# Session 5, call f, on nvidia-h200 (2026-12-01): fp4_matvec after copy_rows (ring copies without a division
# per chunk) and the B columns 3..7 of expand=mma without predication, timed against the champion built from
# the committed kernel.cu (HEAD), plus ncu (stall breakdown) of the champion and of an mma genome.
#   bash tools/h200/session5-f.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/f; mkdir -p $R
{ date -u; git log -1 --format=%H 2>/dev/null; git status --short; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
git show HEAD:candidates/fp4_matvec/kernel.cu > /tmp/fp4_head_kernel.cu
timeout 300 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session5-fp4-copyrows.json 15 > $R/fp4-probe.txt 2>&1
echo "rc=$?" >> $R/fp4-probe.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ST=""
for s in long_scoreboard short_scoreboard mio_throttle lg_throttle barrier math_pipe_throttle wait not_selected selected \
         no_instruction dispatch_stall tex_throttle branch_resolving imc_miss; do
  ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="smsp__inst_executed.sum,dram__bytes_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum$ST"
run() {  # name genome
  timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section Occupancy \
      --section SchedulerStats --section WarpStateStats --metrics "$M" \
      python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$2" in7168_out18432 3 > $R/ncu-$1.txt 2>&1; echo "rc=$?" >> $R/ncu-$1.txt
}
run f16-champ '{"expand":"f16","qload":"cp_async","row_groups":1,"rows_per_block":8,"unroll":1,"warps":4}'
run mma32 '{"expand":"mma","qload":"cp_async","row_groups":4,"rows_per_block":32,"unroll":1,"warps":8}'
cat $R/fp4-probe.txt | grep -v "^copy"
for f in $R/ncu-*.txt; do echo "== $f"; grep -E "Duration|Issue Slots Busy|Eligible Warps|Active Warps Per|Registers Per|smsp__|l1tex__|rc=" $f | grep -v " 0$" ; done
