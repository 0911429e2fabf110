#!/usr/bin/env bash
# Session 4, call g, on nvidia-h200-x2 (2026-12-01): CPU only, the 32 cores for the mhc_prenorm_gemm search
# benchmark's Optuna rows (its TPE did not finish in 35 min on the 2-core machine). Kernel Tuner is not
# installed there: its rows run on the 2-core machine.
#   bash tools/h200/session4-g.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
R=$OUT/g; mkdir -p $R
{ date -u; nproc; python3 -c "import numpy, optuna, sys; print(sys.version.split()[0], 'numpy', numpy.__version__, 'optuna', optuna.__version__)"; } > $R/device.txt 2>&1
cp docs/search-efficiency.md $R/se-tpe.md; cp docs/search-efficiency.md $R/se-rest.md
( timeout 540 python3 tools/search_bench.py --family mhc_prenorm_gemm --seeds 20 --jobs 20 --strategies tpe \
    --out $R/se-tpe.md > $R/bench-tpe.txt 2>&1; echo "rc=$?" >> $R/bench-tpe.txt ) &
( timeout 540 python3 tools/search_bench.py --family mhc_prenorm_gemm --seeds 20 --jobs 11 \
    --strategies "surrogate,evolutionary,random,nsga2" --out $R/se-rest.md > $R/bench-rest.txt 2>&1; echo "rc=$?" >> $R/bench-rest.txt ) &
wait
tail -n 20 $R/bench-tpe.txt $R/bench-rest.txt
