#!/usr/bin/env bash
# A kernel.cu change of the fp4 tma path, checked and measured in one device call (session 7, calls f and i):
# GPU tests of the fp4 mma paths, memcheck of two tma genomes and racecheck of one, probes of
# tools/h200/session7-${CALL}1.json (against the kernel before the change: the patch reversed on a copy, at
# /tmp/evo-variants/head) and ${CALL}2.json (against champion #70), and the recorded sweep's tma genomes measured
# again (tools/sweep.py --redo qload=tma). PATCH: the change against the commit before it, as in the working tree.
#   bash tools/h200/tma_change_check.sh CALL PATCH
# SESSION (default session7) prefixes the probe files; NCU=1 adds ncu's issue and stall counters of the 8-warp
# genome at the anchor (before and after the change, as in session 7 call d).
CALL=$1 PATCH=$2
SESSION=${SESSION:-session7} NCU=${NCU:-0}
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/$CALL; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
mkdir -p /tmp/evo-variants/head && cp candidates/fp4_matvec/kernel.cu /tmp/evo-variants/head/ &&
  (cd /tmp/evo-variants/head && git apply -R -p3 --include=kernel.cu "$OLDPWD/tools/h200/$PATCH") || exit 1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for gw in '"rows_per_block":16,"unroll":1,"warps":8' '"rows_per_block":16,"unroll":2,"warps":2'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
      "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,$gw}" in7168_out18432 1 >> $R/memcheck-tma.txt 2>&1
  echo "rc=$? $gw" >> $R/memcheck-tma.txt
done
timeout 90 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in4096_out4096 1 \
    > $R/racecheck-tma.txt 2>&1; echo "rc=$?" >> $R/racecheck-tma.txt
PROBES="${CALL}1 ${CALL}2"
if [ -f tools/h200/$SESSION-${CALL}3.json ]; then  # a third probe (its reference source set up by the caller)
  PROBES="$PROBES ${CALL}3"
fi
for p in $PROBES; do
  timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/$SESSION-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
if [ "$NCU" = 1 ]; then
  NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  ST=""
  for s in long_scoreboard short_scoreboard mio_throttle barrier math_pipe_throttle wait not_selected selected \
           no_instruction dispatch_stall branch_resolving sleeping; do
    ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
  done
  M="smsp__inst_executed.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed$ST"
  G='{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}'
  timeout 100 $NCUB --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight \
      --section SchedulerStats --metrics "$M" python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$G" \
      in7168_out18432 3 > $R/ncu-new.txt 2>&1; echo "rc=$?" >> $R/ncu-new.txt
fi
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --redo qload=tma --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --peer off \
    --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck-tma.txt $R/racecheck-tma.txt
for p in $PROBES; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 12; done
[ "$NCU" = 1 ] && grep -E "Duration|Issued Warp|Eligible|smsp__|sm__|l1tex__|rc=" $R/ncu-new.txt | grep -v " 0$"
grep -h "redo\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; tail -n 9 $R/fp4_matvec-sweep.log
