#!/usr/bin/env bash
# One device call's checks and measurements of fp4 tma kernel changes (session 9 on), all results in $OUT/$CALL.tgz
# (a call brings back 8 files at most): GPU tests of the fp4 mma genomes, memcheck of three tma genomes and
# racecheck (the working tree's kernel), the probes tools/h200/$SESSION-${CALL}N.json that exist (N = 1..4),
# and timelines at the anchor (tools/h200/timeline.py).
#   VARIANTS: "name=patch[,patch...] ..." kernels built under /tmp/evo-variants/name from the working tree's
#     kernel.cu by tools/h200 patches applied in order (-p1; a leading '-' applies one reversed); probes name them
#     as /tmp/evo-variants/name/kernel.cu.
#   TIMELINES: "name:unroll[:warps[:launch]] ..." (name "tree": the working tree's kernel) of the 16-row genome (8
#     warps unless given; launch pdl: tools/h200/timeline.py --pdl).
#   SWEEP=1 measures the recorded sweep's tma genomes again (tools/sweep.py --redo qload=tma).
#   CEIL="name:unroll[:warps[:qload[:launch]]] ..." (launch plain or pdl) measures the 16-row genome (qload tma unless given) and the copy ceiling
#     alternately at the anchor, 6 trials (tools/h200/ceiling_probe.py).
#   A probe JSON with "parts" runs tools/h200/pdl_probe.py (plain and PDL launches), else genome_probe.py; ROUNDS
#     sets their rounds (12 unless given).
#   CHECKS=0 skips the GPU tests, memcheck and racecheck of the working tree's kernel (a call that only times
#     variants); RACE="name ..." racechecks variants at in7168_out7168_bf16 (16 rows x 8 warps, 2 stages).
#   (Session 12's calls d and g ran this script with a memcheck and racechecks of qload = tma2d genomes besides,
#   from session12-tma2d.patch's kernel; that block left with the path.)
#   CALL=e SESSION=session9 VARIANTS="head=-session9-e-change.patch" TIMELINES="tree:1 head:1" \
#       bash tools/h200/tma_session_check.sh
set -u
: "${CALL:?}" "${SESSION:?}"
VARIANTS=${VARIANTS:-} TIMELINES=${TIMELINES:-} SWEEP=${SWEEP:-0} CHECKS=${CHECKS:-1} RACE=${RACE:-} CEIL=${CEIL:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD EVO_CACHE_DIR=/tmp/evocache PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/$CALL; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/device.txt 2>&1
V=/tmp/evo-variants; rm -rf $V; mkdir -p $V
for spec in $VARIANTS; do
  name=${spec%%=*}; mkdir -p $V/$name; cp candidates/fp4_matvec/kernel.cu $V/$name/
  for p in $(echo ${spec#*=} | tr , ' '); do
    if [ "${p#-}" != "$p" ]; then (cd $V/$name && git apply -R -p1 "$OLDPWD/tools/h200/${p#-}") || exit 1
    else (cd $V/$name && git apply -p1 "$OLDPWD/tools/h200/$p") || exit 1; fi
  done
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
G='"expand":"mma","qload":"tma","row_groups":1,"rows_per_block":16'
for name in $RACE; do
  k=$V/$name/kernel.cu; [ "$name" = tree ] && k=candidates/fp4_matvec/kernel.cu
  timeout 150 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "{$G,\"unroll\":1,\"warps\":8}" \
      in7168_out7168_bf16 1 $k >> $R/racecheck-variants.txt 2>&1; echo "rc=$? $name" >> $R/racecheck-variants.txt
done
if [ "$CHECKS" = 1 ]; then
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_families.py tests/test_driver_launch.py tests/test_pdl_launch.py -k "fp4_mma or driver or pdl" \
    > $R/pytest-gpu.txt 2>&1; echo "rc=$?" >> $R/pytest-gpu.txt
for gw in '"unroll":1,"warps":8' '"unroll":2,"warps":2' '"unroll":4,"warps":4'; do
  timeout 60 $CS --tool memcheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "{$G,$gw}" in7168_out18432 1 \
      >> $R/memcheck-tma.txt 2>&1; echo "rc=$? $gw" >> $R/memcheck-tma.txt
done
# (in7168_out7168_bf16: 3 or 4 tiles a block, so a buffer of partials is used twice)
for gg in '"unroll":1,"warps":8 in4096_out4096' '"unroll":4,"warps":4 in4096_out4096' \
          '"unroll":1,"warps":8 in7168_out7168_bf16'; do
  gw=${gg% *} geo=${gg#* }
  timeout 150 $CS --tool racecheck python3 tools/h200/launch_one.py configs/fp4_matvec.yaml "{$G,$gw}" $geo 1 \
      >> $R/racecheck-tma.txt 2>&1; echo "rc=$? $gw $geo" >> $R/racecheck-tma.txt
done
fi
PROBES=""
for n in 1 2 3 4; do [ -f tools/h200/$SESSION-$CALL$n.json ] && PROBES="$PROBES $CALL$n"; done
for p in $PROBES; do
  probe=genome_probe; grep -q '"parts"' tools/h200/$SESSION-$p.json && probe=pdl_probe  # (plain and PDL launches)
  timeout 200 python3 tools/h200/$probe.py configs/fp4_matvec.yaml tools/h200/$SESSION-$p.json ${ROUNDS:-12} > $R/probe-$p.txt 2>&1
  echo "rc=$?" >> $R/probe-$p.txt
done
for t in $TIMELINES; do
  IFS=: read -r name u w lm <<< "$t"; w=${w:-8}; tag=$name-u$u; [ "$w" = 8 ] || tag=$tag-w$w
  PF=""; [ "${lm:-plain}" = pdl ] && { PF=--pdl; tag=$tag-pdl; }
  src=$V/$name/kernel.cu; [ "$name" = tree ] && src=candidates/fp4_matvec/kernel.cu
  python3 tools/h200/timeline.py stamp $src $V/stamped-$name.cu || continue
  echo "{\"expand\":\"mma\",\"qload\":\"tma\",\"row_groups\":1,\"rows_per_block\":16,\"unroll\":$u,\"warps\":$w}" \
      > $V/genome-$tag.json
  timeout 60 python3 tools/h200/timeline.py configs/fp4_matvec.yaml $V/genome-$tag.json in7168_out18432 \
      $V/stamped-$name.cu $R/timeline-$tag.json.gz $PF > $R/timeline-$tag.txt 2>&1
  echo "rc=$?" >> $R/timeline-$tag.txt
done
for t in $CEIL; do
  IFS=: read -r name u w ql lm <<< "$t"; w=${w:-8}; ql=${ql:-tma}; tag=$name-u$u; [ "$w" = 8 ] || tag=$tag-w$w
  [ "$ql" = tma ] || tag=$tag-$ql; [ "${lm:-plain}" = plain ] || tag=$tag-$lm
  src=$V/$name/kernel.cu; [ "$name" = tree ] && src=$PWD/candidates/fp4_matvec/kernel.cu
  echo "{\"genome\":{\"expand\":\"mma\",\"qload\":\"$ql\",\"row_groups\":1,\"rows_per_block\":16,\"unroll\":$u,\"warps\":$w},\"geometry\":\"in7168_out18432\",\"source\":\"$src\",\"launch\":\"${lm:-plain}\"}" \
      > $V/ceil-$tag.json
  timeout 240 python3 tools/h200/ceiling_probe.py configs/fp4_matvec.yaml $V/ceil-$tag.json 6 > $R/ceiling-$tag.txt 2>&1
  echo "rc=$?" >> $R/ceiling-$tag.txt
done
if [ "$SWEEP" = 1 ]; then
  python3 tools/sweep.py configs/fp4_matvec.yaml --resume candidates/fp4_matvec/recorded/h200-sweep.json.gz \
      --redo qload=tma --out $R/fp4_matvec-h200-sweep.json.gz --rounds 10 --aa-rounds 40 --batch-ms 1 --peer off \
      --jobs 14 > $R/fp4_matvec-sweep.log 2>&1; echo "rc=$? after $(( $(date +%s) - T0 )) s" >> $R/fp4_matvec-sweep.log
fi
[ "$CHECKS" = 1 ] && { tail -n 3 $R/pytest-gpu.txt; grep -h "^mma {'qload': 'tma'" $R/pytest-gpu.txt
  grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck-tma.txt $R/racecheck-tma.txt; }
[ -n "$RACE" ] && grep -h "RACECHECK SUMMARY\|rc=" $R/racecheck-variants.txt
for p in $PROBES; do echo "== $p"; grep -v "^copy" $R/probe-$p.txt | tail -n 24; done
for f in $R/timeline-*.txt; do echo "== $f"; head -n 15 $f; done
for f in $R/ceiling-*.txt; do echo "== $f"; tail -n 12 $f; done
[ "$SWEEP" = 1 ] && { grep -h "redo\|compiled\|sweep: \(complete\|time\|partial\)\|rc=" $R/fp4_matvec-sweep.log; tail -n 9 $R/fp4_matvec-sweep.log; }
(cd $OUT && tar czf $CALL.tgz $CALL && rm -rf $CALL)
echo "done after $(( $(date +%s) - T0 )) s"
