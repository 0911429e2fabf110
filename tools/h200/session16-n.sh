#!/usr/bin/env bash
# Session 16, call n, on nvidia-h200 (2026-12-01): programmatic dependent launch. Call l: every variant pays
# 1.3-1.7 µs between one launch's last block and the next launch's first. With PDL (harness/driver_launch.py) the
# next launch's blocks take the SMs this launch's blocks leave, set up and stream their first weights meanwhile, and
# wait (griddepcontrol.wait) only before x and y. Parts (tools/h200/pdl_probe.py, tools/h200/session16-n1.json):
# the tree plainly; pdl's source (session16-n-pdl.patch: trigger at the start) plainly and with PDL; pdll (trigger
# after the producer's last copies) with PDL; the tree with PDL (no waits: a control, not a safe kernel).
# GPU tests of harness/driver_launch.py first.
#   bash tools/h200/session16-n.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s); R=$OUT/n; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
V=/tmp/evo-variants; rm -rf $V; mkdir -p $V/pdl $V/pdll
cp candidates/fp4_matvec/kernel.cu $V/pdl/ && (cd $V/pdl && git apply -p1 $OLDPWD/tools/h200/session16-n-pdl.patch) || exit 1
cp $V/pdl/kernel.cu $V/pdll/ && (cd $V/pdll && git apply -p1 $OLDPWD/tools/h200/session16-n-pdll.patch) || exit 1
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_driver_launch.py > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
tail -n 3 $R/pytest-gpu.txt
timeout 400 python3 tools/h200/pdl_probe.py configs/fp4_matvec.yaml tools/h200/session16-n1.json 12 > $R/probe-n1.txt 2>&1
echo "rc=$?" >> $R/probe-n1.txt; cat $R/probe-n1.txt
(cd $OUT && tar czf n.tgz n && rm -rf n)
echo "done after $(( $(date +%s) - T0 )) s"
