#!/usr/bin/env bash
# Session 14, call j, on nvidia-h200 (2026-12-01): the GPU tests on the session's final kernel (57038e0: the light
# blocks' late start, the first fill's gap at 2200): tests/test_gpu.py and tests/test_gpu_families.py whole, then the
# fp4 tma checks (memcheck, racecheck) of tools/h200/tma_session_check.sh.
#   bash tools/h200/session14-j.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/j; mkdir -p $R
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_gpu_families.py \
    > $R/pytest-gpu-all.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu-all.txt
tail -n 4 $R/pytest-gpu-all.txt
CALL=j SESSION=session14 CHECKS=1 bash tools/h200/tma_session_check.sh
