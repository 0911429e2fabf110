#!/usr/bin/env bash
# On a GPU machine, from the repository root: the open issues' GPU bars, one step per argument, each within its own
# seconds, raw output under $OUT (default benchmarks/scratch/gpu-bars, ignored). Written for one device call that
# may be cut short: steps run in the order given and each writes its files as it goes.
#
#   python3 -m pip wheel --no-deps -w .whl .   # beside the device wheels (../shared/tools/device-wheels.sh)
#   EVO_COMMIT=$(git rev-parse --short HEAD) bash benchmarks/gpu_bars.sh STEP:SECONDS ...
#
# STEP:
#   engines   #40: benchmarks/engine_check.sh headerlib:2 (installed wheel: check, run, selfcheck with the half-rows
#             in-place fault, export --tree applied with git am), then the engine and kernel-parameter GPU tests;
#             engines@NAME: another engine of examples/engines/ (torchext, multikernel) instead of headerlib
#   tests     #41/#40: every other gpu-marked test of the checkout (pytest -v, durations); GPU_TESTS="a.py b.py::t"
#             runs only those
#   peers     #44 item 3: examples/fused_add_rmsnorm/peer.yaml (the champion, an engine kernel family and
#             torch.compile timed in one interleaved run), its log's Peer section
#   profile   #44: the decode profile of examples/fused_add_rmsnorm (python -m evo.e2e.hf ... --profile) and four
#             more decodes for the noise floor, kept in /tmp/gpu-bars for `e2e`
#   e2e       #44: examples/fused_add_rmsnorm/e2e.yaml from the baseline on that profile (noise floor measured)
#   bigfuse   #42: evo run configs/mhc_pre_big_fuse.yaml from the baseline, unattended, 5 minutes (its log shows
#             the finish); compare its champion with the committed H200 sweep's best on an H200
#   sweep     #42: a recorded sweep of configs/mhc_pre_big_fuse.yaml on this card (benchmarks/sweeps.sh, the shipped
#             sweep's settings; the file named after the card: h100, h200), for a campaign's champion on a card no
#             committed sweep measured (tools/compare_sweeps.py --genome); sweep@CONFIG: another config
set -u
root=$(pwd)
OUT=${OUT:-$root/benchmarks/scratch/gpu-bars}
mkdir -p "$OUT" /tmp/gpu-bars
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /dev/null 2>&1 || echo "device wheels not installed (.whl/)"
# the wheels on every interpreter's path: tests' subprocesses set PYTHONPATH to the checkout alone
# (a venv ignores the user site: the interpreter's own site-packages too, where it may be written)
us=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p "$us" && echo /tmp/site > "$us/evo-device.pth"
pl=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && { echo /tmp/site > "$pl/evo-device.pth"; } 2>/dev/null
export PYTHONPATH=$root:/tmp/site EVO_CACHE_DIR=/tmp/evocache EVO_TEST_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv; echo "commit: ${EVO_COMMIT:-unknown}"; } >> "$OUT/device.txt" 2>&1
gpu_tests() {  # name, seconds, pytest arguments...
    local name=$1 s=$2; shift 2
    timeout "$s" python3 -m pytest -v -rA -p no:cacheprovider -p no:xdist -m gpu --durations=0 "$@" > "$OUT/$name.txt" 2>&1
    echo "rc=$?" >> "$OUT/$name.txt"; tail -n 3 "$OUT/$name.txt"
}
for spec in "$@"; do
    step=${spec%%:*}; s=${spec##*:}; t0=$(date +%s); left() { echo $(( s - ($(date +%s) - t0) )); }
    engine=headerlib; case $step in *@*) engine=${step#*@}; step=${step%%@*} ;; esac
    cd "$root" || exit 1
    case $step in
    engines)
        OUT=$OUT/engines timeout $(( s * 2 / 3 )) bash benchmarks/engine_check.sh "$engine:2"
        gpu_tests pytest-engines "$(left)" tests/test_kernel_params.py tests/test_engine_fixtures.py ;;
    tests)
        # GPU_TESTS: only these (e.g. the ones an earlier call left unrun)
        # shellcheck disable=SC2086
        gpu_tests pytest-gpu "$s" ${GPU_TESTS:-tests --ignore=tests/test_engine_fixtures.py --ignore=tests/test_kernel_params.py} ;;
    peers)
        rm -rf /tmp/gpu-bars/fa && cp -r examples/fused_add_rmsnorm /tmp/gpu-bars/fa && cd /tmp/gpu-bars/fa || exit 1
        { echo "\$ evo run peer.yaml --plain"; timeout "$(left)" python3 -m evo run peer.yaml --plain; echo "rc=$?"
          python3 -m evo log peer.yaml -o "$OUT/peer-attempts.md"; } > "$OUT/peer-run.txt" 2>&1
        sed -n '/## Peer/,/^## [A-OQ-Z]/p' "$OUT/peer-attempts.md" | head -n 30 ;;
    profile)
        cd examples/fused_add_rmsnorm && mkdir -p /tmp/gpu-bars/profiles || exit 1
        for i in 1 2 3 4 5; do
            [ "$(left)" -gt 50 ] || break
            a=(--config llama-3-8b-like --layers 4 --tokens 128 --family .)
            [ "$i" = 1 ] && a+=(--profile /tmp/gpu-bars/profiles/hf_decode.csv)
            timeout "$(left)" python3 -m evo.e2e.hf "${a[@]}" > "$OUT/hf-decode-$i.txt" 2>&1; echo "rc=$?" >> "$OUT/hf-decode-$i.txt"
        done
        # the engine's own modules (no --family): is the baseline kernel's stream the engine's own?
        timeout "$(left)" python3 -m evo.e2e.hf --config llama-3-8b-like --layers 4 --tokens 128 > "$OUT/hf-decode-engine.txt" 2>&1
        cp /tmp/gpu-bars/profiles/hf_decode.csv "$OUT/" 2>/dev/null; grep "tokens/s\|sha256\|profile" "$OUT"/hf-decode-*.txt ;;
    e2e)
        w=/tmp/gpu-bars/e2e && rm -rf $w && mkdir -p $w && cp -r examples/fused_add_rmsnorm $w/family && cd $w/family || exit 1
        mkdir -p profiles && cp /tmp/gpu-bars/profiles/hf_decode.csv profiles/ || { echo "e2e: run the profile step first"; continue; }
        nf=$(python3 -c 'import glob, re, statistics as st
v = [float(m.group(1)) for f in glob.glob("'"$OUT"'/hf-decode-[0-9].txt") for m in [re.search(r"tokens/s: ([0-9.]+)", open(f).read())] if m]
print(round(max(0.01, (max(v) - min(v)) / st.median(v)), 4) if len(v) >= 3 else 0.01)')
        sed -i "s/noise_floor: 0.01}/noise_floor: $nf}/" e2e.yaml
        st=sqlite:///$w/ledger.db
        { echo "noise floor: $nf (from $OUT/hf-decode-*.txt)"; echo "\$ evo run e2e.yaml --minutes $(( s / 90 )) --plain"
          timeout "$(left)" python3 -m evo run e2e.yaml --minutes $(( s / 90 )) --plain --storage "$st"; echo "rc=$?"
          python3 -m evo status e2e.yaml --storage "$st"; } > "$OUT/e2e-campaign.txt" 2>&1
        python3 -m evo log e2e.yaml --storage "$st" -o "$OUT/e2e-attempts.md" >> "$OUT/e2e-campaign.txt" 2>&1
        cp e2e.yaml "$OUT/"; tail -n 20 "$OUT/e2e-campaign.txt" ;;
    bigfuse)
        st=sqlite:////tmp/gpu-bars/bigfuse.db && rm -f /tmp/gpu-bars/bigfuse.db
        { echo "\$ evo run configs/mhc_pre_big_fuse.yaml --minutes 5 --plain --storage $st"
          timeout "$(left)" python3 -m evo run configs/mhc_pre_big_fuse.yaml --minutes 5 --plain --storage "$st"
          echo "rc=$?"; python3 -m evo status configs/mhc_pre_big_fuse.yaml --storage "$st" --json; } > "$OUT/bigfuse-run.txt" 2>&1
        python3 -m evo log configs/mhc_pre_big_fuse.yaml --storage "$st" -o "$OUT/bigfuse-attempts.md" >> "$OUT/bigfuse-run.txt" 2>&1
        cp /tmp/gpu-bars/bigfuse.db "$OUT/" 2>/dev/null; tail -n 15 "$OUT/bigfuse-run.txt" ;;
    sweep)
        [ "$engine" = headerlib ] && engine=configs/mhc_pre_big_fuse.yaml
        batch=1; case $engine in *mhc_pre_big_fuse*) batch=2 ;; esac  # the settings the shipped sweep was recorded with
        card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | grep -o -i -E 'h100|h200|a100|l40s' | head -n 1)
        OUT=$OUT/sweeps CARD=$(echo "${card:-gpu}" | tr 'A-Z' 'a-z') bash benchmarks/sweeps.sh "$engine:$(( s - 20 )):$batch" ;;
    *) echo "unknown step $step (engines, tests, peers, profile, e2e, bigfuse, sweep)" ;;
    esac
done
# the device tool returns at most eight files a call: everything also as one archive, listed first by name
(cd "$OUT" && tar czf /tmp/gpu-bars/0-all.tgz --exclude='*.db' . && mv /tmp/gpu-bars/0-all.tgz "$OUT/")
