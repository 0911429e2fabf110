#!/usr/bin/env bash
# Session 12, call j, on nvidia-h200 (2026-12-01): the probes after their timing moved to tools/h200/graph_timing.py
# (no change of method): tools/h200/tma_copy_probe.py (call c's) and tools/h200/read_floor.py (session 11 call e's)
# again, and tests/test_gpu.py.
#   bash tools/h200/session12-j.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/j; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 200 python3 tools/h200/tma_copy_probe.py configs/fp4_matvec.yaml > $R/tma-copy.txt 2>&1; echo "rc=$?" >> $R/tma-copy.txt
echo '{"genome":{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8},"geometry":"in7168_out18432"}' > /tmp/rf.json
timeout 240 python3 tools/h200/read_floor.py configs/fp4_matvec.yaml /tmp/rf.json > $R/read-floor.txt 2>&1; echo "rc=$?" >> $R/read-floor.txt
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
cat $R/tma-copy.txt; tail -n 8 $R/read-floor.txt; tail -n 3 $R/pytest-gpu.txt
