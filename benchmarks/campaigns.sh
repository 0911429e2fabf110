#!/usr/bin/env bash
# On a GPU machine, from the repository root: shipped campaigns run by the checkout's evo, each with its status,
# ablation, log, per-attempt table and export (the series applied with `git am`), then optionally the GPU tests. Raw output
# goes to $OUT (default benchmarks/scratch/campaigns, ignored); what a document cites is summarised under
# benchmarks/results/<date>-<what>/.
#
#   EVO_COMMIT=$(git rev-parse --short HEAD) bash benchmarks/campaigns.sh [--tests SECONDS] CONFIG:MINUTES ...
#
# CONFIG: a shipped config (configs/NAME.yaml, by path or name), or the path of a user's family config (its folder
# names the outputs); for such a family kept in a git repository, `evo export --tree` too, applied with `git am` to a
# clone of that repository (the repository itself is never written).
# Device wheels (../shared/tools/device-wheels.sh) in .whl/ are installed to /tmp/site first when present.
set -u
root=$(pwd)
OUT=${OUT:-$root/benchmarks/scratch/campaigns}
mkdir -p "$OUT"
test_s=0
if [ "${1:-}" = "--tests" ]; then test_s=$2; shift 2; fi
rm -f "$OUT/device.txt"  # one run per $OUT
. "$(dirname "$0")/device-env.sh"
for spec in "$@"; do
    cfg=${spec%%:*}; minutes=${spec##*:}; name=$(basename "$cfg" .yaml); path=configs/$name.yaml
    if [ -f "$cfg" ] && [ "$(cd "$(dirname "$cfg")" && pwd -P)" != "$(cd "$root/configs" && pwd -P)" ]; then
        # a user's family config: named by its folder (and by the file, unless it is the usual evo.yaml)
        path=$cfg; name=$(basename "$(cd "$(dirname "$cfg")" && pwd -P)")
        [ "$(basename "$cfg")" = evo.yaml ] || name="$name-$(basename "$cfg" .yaml)"
    fi
    work=/tmp/evo-campaigns/$name
    rm -rf "$work" && mkdir -p "$work"
    o="$OUT/$name.txt"
    {
        if [ "$path" != "configs/$name.yaml" ]; then echo "\$ evo check $path"; python3 -m evo check "$path"; fi
        echo "\$ evo run $path --minutes $minutes --plain  (storage sqlite:///$work/ledger.db)"
        python3 -m evo run "$path" --minutes "$minutes" --plain --storage "sqlite:///$work/ledger.db"
        echo "rc=$?"
        echo "\$ evo status"; python3 -m evo status "$path" --storage "sqlite:///$work/ledger.db"
    } > "$o" 2>&1
    {   # which of the champion's changes carry its gain (exit 2, one line, when the champion is the baseline)
        echo "\$ evo ablate"; python3 -m evo ablate "$path" --storage "sqlite:///$work/ledger.db"
        echo "rc=$?"
    } >> "$o" 2>&1
    python3 -m evo log "$path" --storage "sqlite:///$work/ledger.db" -o "$OUT/$name-attempts.md" >> "$o" 2>&1
    {
        echo "\$ evo export -o $work/export"
        python3 -m evo export "$path" --storage "sqlite:///$work/ledger.db" -o "$work/export"; echo "rc=$?"
        base=$(ls "$work/export/"baseline-*.cu 2>/dev/null | head -n 1)
        if [ -n "$base" ]; then
            kernel=$(basename "$base"); kernel=${kernel#baseline-}
            mkdir -p "$work/am" && cd "$work/am" && git init -q && cp "$base" "$kernel" \
                && git add . && git -c user.name=check -c user.email=check@localhost commit -qm baseline \
                && git -c user.name=check -c user.email=check@localhost am "$work/export/"*.patch; echo "git am rc=$?"
            git log --format='%h %s'; cd "$root" || exit 1
        fi
    } >> "$o" 2>&1
    cat "$work/export/"*.patch > "$OUT/$name-patches.txt" 2>/dev/null
    repo=$(git -C "$(dirname "$path")" rev-parse --show-toplevel 2>/dev/null)
    if [ "$path" != "configs/$name.yaml" ] && [ -n "$repo" ] && [ "$repo" != "$root" ]; then
        {
            echo "\$ evo export --tree -o $work/export-tree; git am in a clone of $repo"
            python3 -m evo export "$path" --storage "sqlite:///$work/ledger.db" -o "$work/export-tree" --tree
            echo "rc=$?"
            git clone -q "$repo" "$work/repo" && cd "$work/repo" \
                && git -c user.name=check -c user.email=check@localhost am "$work/export-tree/tree/"*.patch
            echo "git am rc=$?"; git log --format='%h %s' | head -n 12; git diff --stat HEAD~1 2>/dev/null | tail -n 3
            cd "$root" || exit 1
        } >> "$o" 2>&1
        cat "$work/export-tree/tree/"*.patch > "$OUT/$name-tree-patches.txt" 2>/dev/null
    fi
    tail -n 25 "$o"
done
if [ "$test_s" -gt 0 ]; then
    timeout "$test_s" python3 -m pytest -q -p no:cacheprovider -p no:xdist -m gpu tests > "$OUT/pytest-gpu.txt" 2>&1
    echo "rc=$?" >> "$OUT/pytest-gpu.txt"
    tail -n 8 "$OUT/pytest-gpu.txt"
fi
