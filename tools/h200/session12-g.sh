#!/usr/bin/env bash
# Session 12, call g, on nvidia-h200 (2026-12-01): qload = tma2d rebuilt (the working tree): the ring's slots hold
# whole tiles, each as one tensor copy a 32-block step (7 a tile at in=7168, issued by 7 lanes at once); the middle
# tiles' steps complete on one mbarrier (a wait and a release a tile, as qload = tma), the block's first and last
# tiles' on one a step, followed as they land. GPU tests of the fp4 mma genomes, memcheck and racecheck (tma, tma2d);
# beside the tma genome (g1): 2 and 3 slots, and timing variants nofine (no tile a step at a time: tensor copies
# against bulk copies alone), last (the last tile only), all (every tile), nowait (the first fill without waiting
# for tile 0). (The probe stopped at its 200 s limit after the two tree genomes: nofine hung, its producer waiting for
# tile 0's step mbarrier, which that variant never uses; the tree's kernel then waited on the right one in call h.)
# (The working tree then: 7da6e88 with session12-tma2d.patch applied, its producer's first-fill wait still on tile 0's
# step mbarrier whatever the tile's kind; the variants patch that kernel.)
#   bash tools/h200/session12-g.sh
CALL=g SESSION=session12 CHECKS=1 \
  VARIANTS="nofine=session12-g-nofine.patch last=session12-g-last.patch all=session12-g-all.patch nowait=session12-g-nowait.patch" \
  exec bash tools/h200/tma_session_check.sh
