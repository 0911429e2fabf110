#!/usr/bin/env bash
# Session 18 (2026-12-01): every part's CUDA graph sized for itself (about batch_ms of its own launches). Call e
# (logs/h200/2026-12-01-session18/e) timed the fp4 champion at 20.78 µs in graphs of the baseline's 55 launches and
# 20.29 in graphs of its own 410, in the same rounds. The GPU tests (harness/gpu.py's per-part counts among them),
# then configs/fp4_matvec_pdl.yaml for 5 minutes, as sessions 16 and 17 ran it, now with per-part graphs.
#   bash tools/h200/session18-b.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/b; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
timeout 120 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_pdl_launch.py \
    > $R/pytest-gpu.txt 2>&1
echo "rc=$?" >> $R/pytest-gpu.txt
tail -3 $R/pytest-gpu.txt
(cd $OUT && tar czf b-tests.tgz b && rm -rf b)
MINUTES=5 bash tools/h200/fp4_campaign.sh b-campaign configs/fp4_matvec_pdl.yaml
