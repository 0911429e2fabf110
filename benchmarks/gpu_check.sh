#!/usr/bin/env bash
# On a GPU machine, from the repository root: a campaign on the example family (examples/fused_add_rmsnorm) run by
# an *installed* evo (the built wheel, from a folder outside the checkout), its status, log and export, the
# exported series applied with `git am`; then the checkout's GPU tests. Raw output goes to $OUT (default
# benchmarks/scratch/gpu-check, ignored); what a document cites is summarised under benchmarks/results/.
#
#   python -m pip wheel --no-deps -w .whl .   # beside the device wheels (../shared/tools/device-wheels.sh)
#   EVO_COMMIT=$(git rev-parse --short HEAD) bash benchmarks/gpu_check.sh [campaign minutes, default 3] [GPU-test s, default 200]
set -u
root=$(pwd)
OUT=${OUT:-$root/benchmarks/scratch/gpu-check}
mkdir -p "$OUT"
minutes=${1:-3}
test_s=${2:-200}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv
    echo "commit: ${EVO_COMMIT:-unknown (set EVO_COMMIT: the device copy of .git may be older than the tree sent)}"
    echo "evo imported from: $(cd /tmp && python3 -c 'import evo; print(evo.__file__)')"
    echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
} > "$OUT/device.txt" 2>&1

work=/tmp/evo-user
rm -rf "$work" && mkdir -p "$work" && cp -r examples/fused_add_rmsnorm "$work/rmsnorm"
cd "$work/rmsnorm" || exit 1
{ echo "\$ evo check evo.yaml"; evo check evo.yaml; echo "rc=$?"; } > "$OUT/campaign.txt" 2>&1
{ echo "\$ evo run evo.yaml --minutes $minutes --plain"; timeout 360 evo run evo.yaml --minutes "$minutes" --plain
  echo "rc=$?"; echo "\$ evo status evo.yaml"; evo status evo.yaml; } >> "$OUT/campaign.txt" 2>&1
evo log evo.yaml -o "$OUT/attempts.md" >> "$OUT/campaign.txt" 2>&1
{
    echo "\$ evo export evo.yaml -o $work/export"; evo export evo.yaml -o "$work/export"; echo "rc=$?"
    mkdir -p "$work/am" && cd "$work/am" && git init -q \
        && cp "$work/export/baseline-fused_add_rmsnorm.cu" fused_add_rmsnorm.cu && git add . \
        && git -c user.name=check -c user.email=check@localhost commit -qm baseline
    echo "\$ git am $work/export/*.patch"
    git -c user.name=check -c user.email=check@localhost am "$work/export/"*.patch; echo "rc=$?"
    git log --format='%h %s'
    cmp fused_add_rmsnorm.cu "$work/export/fused_add_rmsnorm.cu" && echo "the series ends at the exported final kernel"
} > "$OUT/export.txt" 2>&1
cat "$work/export/"*.patch > "$OUT/patches.txt" 2>/dev/null
cd "$root" || exit 1
export PYTHONPATH=$root:/tmp/site  # the checkout's own code for its tests
timeout "$test_s" python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$OUT/pytest-gpu.txt" 2>&1
echo "rc=$?" >> "$OUT/pytest-gpu.txt"
tail -n 5 "$OUT/campaign.txt" "$OUT/export.txt" "$OUT/pytest-gpu.txt"
