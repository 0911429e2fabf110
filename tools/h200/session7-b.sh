#!/usr/bin/env bash
# Session 7, call b, on nvidia-h200 (2026-12-01): qload=tma on int8 tensor cores (tools/h200/session7-b-int8.patch
# against a163b75's candidates/fp4_matvec, as in the working tree of the call): the GPU tests of the fp4 mma paths,
# memcheck of two tma genomes, a probe of tma genomes against champion #70, ncu of the 8-warp genome; then the same
# probe of a163b75's f16 tma kernel (the patch reversed on the device's copy) against #70; last, the recorded
# sweep's tma genomes measured again with the int8 kernel (tools/sweep.py --redo qload=tma).
#   bash tools/h200/session7-b.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/b; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py -k "fp4_mma" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for gw in '"rows_per_block":16,"unroll":1,"warps":8' '"rows_per_block":32,"unroll":2,"warps":1'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
      "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,$gw}" in7168_out18432 1 >> $R/memcheck-tma.txt 2>&1
  echo "rc=$? $gw" >> $R/memcheck-tma.txt
done
timeout 200 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-b.json 12 > $R/probe-int8.txt 2>&1
echo "rc=$?" >> $R/probe-int8.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ST=""
for s in long_scoreboard short_scoreboard mio_throttle barrier math_pipe_throttle wait not_selected selected \
         no_instruction dispatch_stall branch_resolving sleeping; do
  ST="$ST,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="smsp__inst_executed.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed$ST"
timeout 100 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section SpeedOfLight --section SchedulerStats \
    --metrics "$M" python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
    '{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}' in7168_out18432 3 \
    > $R/ncu-int8.txt 2>&1; echo "rc=$?" >> $R/ncu-int8.txt
git apply -R tools/h200/session7-b-int8.patch || exit 1
timeout 120 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session7-b-old.json 12 > $R/probe-f16.txt 2>&1
echo "rc=$?" >> $R/probe-f16.txt
git apply tools/h200/session7-b-int8.patch || exit 1
python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
    --redo qload=tma --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --peer off \
    --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
grep -h "ERROR SUMMARY\|rc=" $R/memcheck-tma.txt
for f in int8 f16; do echo "== $f"; grep -v "^copy" $R/probe-$f.txt | tail -n 24; done
grep -E "Duration|Issued Warp|Eligible|smsp__|sm__|l1tex__|rc=" $R/ncu-int8.txt | grep -v " 0$"
grep -h "redo\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; tail -n 9 $R/fp4_matvec-sweep.log
