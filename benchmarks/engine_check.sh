#!/usr/bin/env bash
# On a GPU machine, from the repository root: campaigns on the engine-shaped families of examples/engines/, each
# copied into a git repository of its own (as a user's engine tree is), run by an *installed* evo (the built wheel in
# .whl/, used from a folder outside the checkout): evo check, evo run, status, selfcheck (the family's deliberate
# faults, e.g. an in-place variant that writes half the rows), log, export, export --tree applied with `git am` to a
# clone of that engine tree; then the checkout's GPU tests. Raw output goes to $OUT (default
# benchmarks/scratch/engine-check, ignored); what a document cites is summarised under benchmarks/results/.
#
#   python3 -m pip wheel --no-deps -w .whl .   # beside the device wheels (../shared/tools/device-wheels.sh)
#   EVO_COMMIT=$(git rev-parse --short HEAD) [GPU_TESTS="tests/a.py ..."] [SELFCHECK=0] bash benchmarks/engine_check.sh \
#       [--tests SECONDS] ENGINE:MINUTES ...
#
# ENGINE: a folder under examples/engines/ (headerlib, torchext, multikernel); its family config is evo/evo.yaml.
set -u
root=$(pwd)
OUT=${OUT:-$root/benchmarks/scratch/engine-check}
mkdir -p "$OUT"
test_s=0
if [ "${1:-}" = "--tests" ]; then test_s=$2; shift 2; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv
    echo "commit: ${EVO_COMMIT:-unknown}"
    echo "evo imported from: $(cd /tmp && python3 -c 'import evo; print(evo.__file__)')"
    echo "nvcc: $(command -v nvcc) $(nvcc --version | tail -n 1)"
} > "$OUT/device.txt" 2>&1
git_() { git -c user.name=check -c user.email=check@localhost "$@"; }
for spec in "$@"; do
    eng=${spec%%:*}; minutes=${spec##*:}
    tree=/tmp/engines/$eng; work=/tmp/engine-work/$eng
    rm -rf "$tree" "$work" && mkdir -p "$(dirname "$tree")" "$work"
    cp -r "examples/engines/$eng" "$tree" && (cd "$tree" && git init -q && git add . && git_ commit -qm "engine tree")
    cfg=$tree/evo/evo.yaml; st="sqlite:///$work/ledger.db"; o="$OUT/$eng.txt"
    cd /tmp || exit 1
    {
        echo "\$ evo check $cfg --sample 4"; evo check "$cfg" --sample 4; echo "rc=$?"
        echo "\$ evo run $cfg --minutes $minutes --plain"
        timeout 330 evo run "$cfg" --minutes "$minutes" --plain --storage "$st"; echo "rc=$?"
        echo "\$ evo status"; evo status "$cfg" --storage "$st"
        if [ "${SELFCHECK:-1}" = 1 ]; then  # SELFCHECK=0: a call that already saw the faults rejected
            echo "\$ evo selfcheck --aa 5"; timeout 300 evo selfcheck "$cfg" --storage "$st" --aa 5; echo "rc=$?"
        fi
        evo log "$cfg" --storage "$st" -o "$OUT/$eng-attempts.md"
        echo "\$ evo export --tree"; evo export "$cfg" --storage "$st" -o "$work/export" --tree; echo "rc=$?"
        git clone -q "$tree" "$work/clone" && cd "$work/clone" && git_ am "$work/export/tree/"*.patch
        echo "git am rc=$?"; git log --format='%h %s' | head -n 12; git diff --stat HEAD~1 2>/dev/null | tail -n 3
        cd /tmp || exit 1
    } > "$o" 2>&1
    cat "$work/export/tree/"*.patch > "$OUT/$eng-tree-patches.txt" 2>/dev/null
    tail -n 30 "$o"
    cd "$root" || exit 1
done
if [ "$test_s" -gt 0 ]; then
    export PYTHONPATH=$root:/tmp/site  # the checkout's own code for its tests
    # GPU_TESTS: test files to run (default: every gpu-marked test)
    timeout "$test_s" python3 -m pytest -q -p no:cacheprovider -p no:xdist -m gpu ${GPU_TESTS:-tests} > "$OUT/pytest-gpu.txt" 2>&1
    echo "rc=$?" >> "$OUT/pytest-gpu.txt"
    tail -n 8 "$OUT/pytest-gpu.txt"
fi
