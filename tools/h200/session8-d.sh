#!/usr/bin/env bash
# Session 8, call d, on nvidia-h200 (2026-12-01): where the committed kernel's (call a's) time goes, by timing
# variants, each probed against the kernel (16 rows x 8 warps, 2 stages): d-nocopy, the producer copies nothing
# (tools/h200/session8-b-nocopy.patch: the consumers alone); d-nox, no x (tools/h200/session8-d-nox.patch: no x
# loads, max or digits; the digits are whatever shared memory holds); d-noxnc, both (session8-d-noxnc.patch: the
# consumer loop, tile ends and barriers alone); d-shflnc, call c's scale shuffles without copies
# (session8-c-shfl.patch then session8-b-nocopy.patch: are those consumers faster alone?).
#   bash tools/h200/session8-d.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/d; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
variant() {  # name, then patches applied in order (-p2 for the session-8 diffs, -p1 for the nocopy one)
  local d=/tmp/evo-variants/d-$1; shift
  mkdir -p $d && cp candidates/fp4_matvec/kernel.cu $d/ || return 1
  for p in "$@"; do (cd $d && git apply ${p%%:*} "$OLDPWD/tools/h200/${p#*:}") || return 1; done
}
variant nocopy -p1:session8-b-nocopy.patch &&
  variant nox -p2:session8-d-nox.patch &&
  variant noxnc -p2:session8-d-noxnc.patch &&
  variant shflnc -p2:session8-c-shfl.patch -p1:session8-b-nocopy.patch || exit 1
for v in nocopy nox noxnc shflnc; do
  timeout 100 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session8-d-$v.json 12 > $R/probe-d-$v.txt 2>&1
  echo "rc=$?" >> $R/probe-d-$v.txt
done
for v in nocopy nox noxnc shflnc; do echo "== $v"; grep -v "^copy" $R/probe-d-$v.txt | tail -n 4; done
