#!/usr/bin/env bash
# Session 16, call p, on nvidia-h200 (2026-12-01): PDL with the next items prefetched into L2. Call o: pdll (PDL,
# trigger after the producer's last copies) 1.028x at the anchor. A PDL launch's blocks fill their two stages during
# the launch before's tail, then wait, load x and compute while the memory idles; pdllpf1/2
# (session16-p-pdllpf1/2.patch on pdll) also prefetch the next 1 or 2 items' rows into L2
# (cp.async.bulk.prefetch.L2) before the wait. pf2plain: pdllpf2's source launched plainly.
#   bash tools/h200/session16-p.sh
P=session16-n-pdl.patch,session16-n-pdll.patch
CALL=p SESSION=session16 CHECKS=0 ROUNDS=40 \
  VARIANTS="pdll=$P pdllpf1=$P,session16-p-pdllpf1.patch pdllpf2=$P,session16-p-pdllpf2.patch" \
  exec bash tools/h200/tma_session_check.sh
