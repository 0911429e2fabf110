#!/usr/bin/env bash
# Session 10, call h, on nvidia-h200 (2026-12-01): why call g's sweep (1 ms batches interleaved with the baseline:
# 5 launches a graph at the anchor) timed the working tree's kernel (x's B in registers) slower than c0fb6a1's while
# the probes (10 ms batches, about 450 launches) timed it 1.038x faster. Probes h1 (both beside the baseline, 1 ms
# batches), h2 (10 ms), h3 (the two side by side, 1 ms: about 45 launches); ncu warp states of both at the anchor.
#   bash tools/h200/session10-h.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/h; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
V=/tmp/evo-variants; rm -rf $V; mkdir -p $V/head; cp candidates/fp4_matvec/kernel.cu $V/head/
(cd $V/head && git apply -R -p1 "$OLDPWD/tools/h200/session10-g-change.patch") || exit 1
for p in h1 h2 h3; do
  timeout 200 python3 tools/h200/genome_probe.py configs/fp4_matvec.yaml tools/h200/session10-$p.json 12 > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
G='{"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"warps":8,"unroll":1}'
for k in tree head; do
  src=""; [ $k = head ] && src=$V/head/kernel.cu
  timeout 120 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --section WarpStateStats --section InstructionStats \
      --section SpeedOfLight python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "$G" in7168_out18432 3 $src \
      > $R/ncu-$k.txt 2>&1; echo "rc=$?" >> $R/ncu-$k.txt
done
for p in h1 h2 h3; do echo "== $p"; cat $R/probe-$p.txt; done
for k in tree head; do echo "== ncu $k"; grep -E "Duration|Stall|Issued Warp|Instructions Executed" $R/ncu-$k.txt; done
(cd $OUT && tar czf h.tgz h && rm -rf h)
