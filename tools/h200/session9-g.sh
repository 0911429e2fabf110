#!/usr/bin/env bash
# Session 9, call g, on nvidia-h200 (2026-12-01): call f's racecheck at in7168_out7168_bf16 reported a hazard; with
# source lines (EVO_LINEINFO=1) for the working tree's kernel (f's) and 0ef7d01's (session9-f-change.patch reversed,
# built through launch_one.py's ref path: a copy of the repo with that kernel).
#   bash tools/h200/session9-g.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1 EVO_LINEINFO=1
R=$OUT/g; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
rm -rf /tmp/headrepo && mkdir /tmp/headrepo && cp -r candidates configs evo gates harness tools /tmp/headrepo/ &&
  (cd /tmp/headrepo/candidates/fp4_matvec && git apply -R -p1 "$OLDPWD/tools/h200/session9-f-change.patch") || exit 1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
GN='{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"unroll":1,"warps":8}'
timeout 200 $CS --tool racecheck --racecheck-report all python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$GN" \
    in7168_out7168_bf16 1 > $R/racecheck-tree.txt 2>&1; echo "rc=$?" >> $R/racecheck-tree.txt
(cd /tmp/headrepo && PYTHONPATH=/tmp/site:/tmp/headrepo timeout 200 $CS --tool racecheck --racecheck-report all \
    python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$GN" in7168_out7168_bf16 1) > $R/racecheck-head.txt 2>&1
echo "rc=$?" >> $R/racecheck-head.txt
for f in tree head; do echo "== $f"; grep -v "^=========     and" $R/racecheck-$f.txt | grep -v "^========= *$" | head -30; done
