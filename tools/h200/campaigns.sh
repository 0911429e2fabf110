#!/usr/bin/env bash
# One device call (2026-11-30, session 2): the mhc_pre_big_fuse campaign (A/A floor, throughput, sanitizer on
# the champion), its selfcheck (A/A acceptance + the fault suite), then, time permitting, a short
# mhc_prenorm_gemm campaign. Run from the repo root on the H200 with .whl carried; results land in $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache-campaigns-$(date +%s) PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
{ date -u; git log -1 --format='commit %H %s' 2>/dev/null || true; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; which compute-sanitizer; } > $OUT/device.txt 2>&1
rm -rf logs/mhc_pre_big_fuse logs/mhc_prenorm_gemm
pack() { tar czf $OUT/ledgers.tgz logs/mhc_pre_big_fuse logs/mhc_prenorm_gemm 2>/dev/null; }
el "campaign mhc_pre_big_fuse"
timeout 330 python3 -m evo run configs/mhc_pre_big_fuse.yaml --minutes 2.5 --attempts 1000 --plain > $OUT/mhc_pre-run.txt 2>&1
el "rc=$?"; grep -v "^#" $OUT/mhc_pre-run.txt | tail -12; pack
el "selfcheck"
timeout 160 python3 -m evo selfcheck configs/mhc_pre_big_fuse.yaml --aa 50 > $OUT/mhc_pre-selfcheck.txt 2>&1
el "rc=$?"; tail -14 $OUT/mhc_pre-selfcheck.txt; pack
if [ $(( $(date +%s) - T0 )) -lt 370 ]; then
  el "campaign mhc_prenorm_gemm"
  EVO_SANITIZER=/nonexistent timeout $(( 560 - ($(date +%s) - T0) )) python3 -m evo run configs/mhc_prenorm_gemm.yaml \
      --minutes 1.5 --attempts 1000 --plain > $OUT/prenorm-run.txt 2>&1
  el "rc=$?"; grep -v "^#" $OUT/prenorm-run.txt | tail -8; pack
fi
el "done"
