#!/usr/bin/env bash
# Session 6, call a, on nvidia-h200 (2026-12-01): fp4_matvec expand=mma with the new qload=tma (bulk copies into
# an mbarrier ring, one block a SM) judged and timed against the campaign champion #70 (f16, cp_async), the GPU
# tests of the mma paths, ncu of one tma genome, memcheck of it, and `evo sanitize` of both session-5 champions.
#   bash tools/h200/session6-a.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
R=$OUT/a; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
TMA='{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":2,"warps":8}'
el "memcheck tma" >> $R/timeline.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 120 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$TMA" in7168_out18432 2 \
    > $R/memcheck-tma.txt 2>&1; echo "rc=$?" >> $R/memcheck-tma.txt
el "probe" >> $R/timeline.txt
timeout 240 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session6-fp4-tma.json 12 > $R/fp4-probe.txt 2>&1
echo "rc=$?" >> $R/fp4-probe.txt
el "gpu tests" >> $R/timeline.txt
timeout 100 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
el "ncu" >> $R/timeline.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ST=""
for s in long_scoreboard short_scoreboard mio_throttle lg_throttle barrier math_pipe_throttle wait not_selected selected \
         no_instruction dispatch_stall tex_throttle branch_resolving imc_miss membar sleeping; do
  ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="smsp__inst_executed.sum,dram__bytes_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum$ST"
timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section Occupancy \
    --section SchedulerStats --section WarpStateStats --metrics "$M" \
    python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$TMA" in7168_out18432 3 > $R/ncu-tma.txt 2>&1; echo "rc=$?" >> $R/ncu-tma.txt
el "sanitize champions" >> $R/timeline.txt
for fam in fp4_matvec moe_q2_matvec; do
  gunzip -c logs/h200/2026-12-01-session5/g/$fam/ledger.db.gz > /tmp/$fam.db
  timeout 150 python3 -m evo sanitize configs/$fam.yaml --storage sqlite:////tmp/$fam.db > $R/sanitize-$fam.txt 2>&1
  echo "rc=$?" >> $R/sanitize-$fam.txt
done
el "done" >> $R/timeline.txt
grep -v "^copy" $R/fp4-probe.txt | tail -n 40
tail -n 5 $R/memcheck-tma.txt; tail -n 4 $R/pytest-gpu.txt; grep -h "^mma {" $R/pytest-gpu.txt
grep -E "Duration|Issue Slots Busy|Eligible Warps|Registers Per|smsp__|l1tex__|dram__|rc=" $R/ncu-tma.txt | grep -v " 0$"
tail -n 3 $R/sanitize-*.txt; cat $R/timeline.txt
