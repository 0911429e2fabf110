# Sourced by benchmarks/campaigns.sh and benchmarks/sweeps.sh on a GPU machine, from the repository root, with $root
# and $OUT set: installs the device wheels in .whl/ (../shared/tools/device-wheels.sh) to /tmp/site, sets the
# environment evo runs in there, and appends the GPU, its driver and clocks and $EVO_COMMIT to $OUT/device.txt.
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        $(ls .whl/*.whl | grep -v -E '/evo(_kernels)?-') || exit 1
fi
export PYTHONPATH=$root:/tmp/site EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv
    echo "commit: ${EVO_COMMIT:-unknown (set EVO_COMMIT: the device copy of .git may be older than the tree sent)}"
    echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
} >> "$OUT/device.txt" 2>&1
