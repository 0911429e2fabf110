#!/usr/bin/env bash
# Session 11, call e, on nvidia-h200 (2026-12-01): the floor of any kernel that reads the anchor's bytes
# (tools/h200/read_floor.py: an empty launch of the kernel's shape, the best plain read of 70.3 MB over 3 x 4 x 3
# shapes, the same read of 4 GiB, the working tree's kernel and the copy ceiling in the same process); the GPU
# tests of tests/test_gpu.py (harness/gpu.py's copy_ceiling changed).
#   bash tools/h200/session11-e.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/e; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
echo '{"genome":{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8},"geometry":"in7168_out18432"}' > /tmp/rf.json
timeout 300 python3 tools/h200/read_floor.py configs/fp4_matvec.yaml /tmp/rf.json > $R/read-floor.txt 2>&1; echo "rc=$?" >> $R/read-floor.txt
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
cat $R/read-floor.txt; tail -n 3 $R/pytest-gpu.txt
