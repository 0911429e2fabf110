#!/usr/bin/env bash
# Session 13, call k, on nvidia-h200 (2026-12-01): the kept kernel (the first fill of call c) alternating with 6 copy
# ceiling measurements in one process (tools/h200/ceiling_probe.py, as session 11 call g), the plain read of the
# anchor's bytes (tools/h200/read_floor.py, as session 11 call e) and tests/test_gpu.py.
#   bash tools/h200/session13-k.sh
set -u
CALL=k SESSION=session13 CHECKS=0 CEIL="tree:1" bash tools/h200/tma_session_check.sh
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/l; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
echo '{"genome":{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8},"geometry":"in7168_out18432"}' > /tmp/rf.json
timeout 240 python3 tools/h200/read_floor.py configs/fp4_matvec.yaml /tmp/rf.json > $R/read-floor.txt 2>&1; echo "rc=$?" >> $R/read-floor.txt
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
tail -n 4 $R/read-floor.txt; tail -n 3 $R/pytest-gpu.txt
(cd $OUT && tar czf l.tgz l && rm -rf l)
