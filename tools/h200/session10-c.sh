#!/usr/bin/env bash
# Session 10, call c, on nvidia-h200 (2026-12-01): Nsight Compute (full set, clocks as found) of c0fb6a1's tma kernel
# at the anchor, 16 rows x 8 warps with 2 and 3 stages: what bounds the consumer warps (pipes, shared memory
# wavefronts and bank conflicts, stall reasons, the hottest SASS).
#   bash tools/h200/session10-c.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
R=$OUT/c; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
G='"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16,"warps":8'
for u in 1 2; do
  timeout 240 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --set full --import-source no \
      --page details --print-details all \
      python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "{$G,\"unroll\":$u}" in7168_out18432 3 > $R/ncu-u$u.txt 2>&1
  echo "rc=$?" >> $R/ncu-u$u.txt
  timeout 120 $NCU --clock-control none -k regex:fp4_matvec -s 2 -c 1 --set full --import-source no \
      --page source --print-source sass \
      python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "{$G,\"unroll\":$u}" in7168_out18432 3 > $R/ncu-sass-u$u.txt 2>&1
  echo "rc=$?" >> $R/ncu-sass-u$u.txt
done
for u in 1 2; do echo "== u$u"; grep -E "Duration|Issue Slots Busy|Eligible Warps|Shared|Bank|Pipe|Stall|Throughput|rc=" $R/ncu-u$u.txt | head -60; done
(cd $OUT && tar czf c.tgz c && rm -rf c)
