#!/usr/bin/env bash
# On a GPU machine, from the repository root: recorded sweeps (tools/sweep.py) of configs, each time-limited and
# resumable, with the settings the shipped sweeps were recorded with. Raw output (the sweep files, their logs,
# device.txt) goes to $OUT (default benchmarks/scratch/sweeps, ignored); what a document cites is summarised under
# benchmarks/results/<date>-<what>/.
#
#   EVO_COMMIT=$(git rev-parse --short HEAD) bash benchmarks/sweeps.sh CONFIG:LIMIT_S[:BATCH_MS] ...
#
# RESUME_FROM=DIR resumes each sweep from DIR/<name>-h200-sweep.json.xz where that file exists (a time-limited sweep
# of an earlier call, its $OUT carried back). The output file is $OUT/<name>-$CARD-sweep.json.xz (CARD: h200 unless
# set; <name>: the config's file name, or an example's folder for its evo.yaml). Device wheels in .whl/ are installed to /tmp/site first;
# device.txt gets one entry per call. The exit status is the first failed sweep's (0: every sweep ran).
set -u
root=$(pwd)
OUT=${OUT:-$root/benchmarks/scratch/sweeps}
RESUME_FROM=${RESUME_FROM:-}   # a folder holding earlier, time-limited sweep files of the same names
CARD=${CARD:-h200}   # the card named in the output files (the shipped sweeps are h200)
mkdir -p "$OUT"
. "$(dirname "$0")/device-env.sh"
jobs=$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))
status=0
for spec in "$@"; do
    IFS=: read -r cfg limit batch <<< "$spec"
    batch=${batch:-1}
    name=$(basename "$cfg" .yaml)
    [ "$name" = evo ] && name=$(basename "$(dirname "$cfg")")  # an example's evo.yaml: its folder's name
    out="$OUT/$name-$CARD-sweep.json.xz"
    resume=()
    prev="${RESUME_FROM:+$RESUME_FROM/$name-$CARD-sweep.json.xz}"
    if [ -n "$prev" ] && [ -f "$prev" ]; then resume=(--resume "$prev"); fi
    cmd=(python3 tools/sweep.py "$cfg" ${resume[@]+"${resume[@]}"} --out "$out" --rounds 10 --aa-rounds 40
         --batch-ms "$batch" --limit-s "$limit" --peer off --jobs "$jobs")
    { date -u; echo "\$ ${cmd[*]}"; "${cmd[@]}"; r=$?; echo "rc=$r"; date -u; } >> "$OUT/$name-sweep.log" 2>&1
    tail -n 6 "$OUT/$name-sweep.log"
    if [ "$status" -eq 0 ]; then status=$(tail -n 2 "$OUT/$name-sweep.log" | sed -n 's/^rc=//p'); fi
done
exit "${status:-0}"
