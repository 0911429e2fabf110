#!/usr/bin/env bash
# Prepared in session 17 (2026-12-01), not run there (its device time was spent): call d's ceiling check again on
# its champion (#75, the 16-row 8-warp tma genome, PDL), with the champion's batches sized by the baseline's launch
# count (as call d ran it) and by its own (as evo/ceiling.py does since): call d's alternations with the copies just
# before the champion read 22.7 µs, the others 20.4-20.6. Then tools/h200/batch_probe.py: the champion timed as a
# campaign times it (graphs of the baseline's 55 launches, beside the baseline) and in graphs of about 10 ms of
# itself, with and without the baseline. First GPU tests: the ceiling check's, and those
# of the backend as the campaign builds it (GpuBackend.for_config since) with PDL launches.
#   bash tools/h200/session17-e.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/e; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_pdl_launch.py \
    tests/test_driver_launch.py > $R/pytest-gpu.txt 2>&1
echo "rc=$?" >> $R/pytest-gpu.txt
timeout 170 python3 tools/h200/ceiling_check_probe.py configs/fp4_matvec_pdl.yaml \
    '{"expand": "mma", "qload": "tma", "row_groups": 1, "rows_per_block": 16, "unroll": 1, "warps": 8}' 6 \
    > $R/check-probe.txt 2>&1; echo "rc=$?" >> $R/check-probe.txt
timeout 200 python3 tools/h200/batch_probe.py configs/fp4_matvec_pdl.yaml 40 > $R/batch-probe.txt 2>&1
echo "rc=$?" >> $R/batch-probe.txt
cat $R/check-probe.txt $R/batch-probe.txt
