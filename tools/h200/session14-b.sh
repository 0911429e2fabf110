#!/usr/bin/env bash
# Session 14, call b, on nvidia-h200 (2026-12-01). b1: call a's ld10 again; ld10h, the same only where the blocks
# with the most tiles are at least half the grid (they alone must keep the memory busy meanwhile: in7168_out7168_bf16
# has 52 of 132 and lost 0.7% in call a); lnf, the light blocks with the old first fill (item 1 once item 0 has
# landed) instead of a delay; ld05lnf, both. b2 (timing variants): ret0 returns at once (this kernel's launch: its
# shape, code and registers; an empty kernel of its shape took 0.54 µs, session 11 call e), xonly sets up the
# mbarriers and x and copies nothing. Where the 1.4 µs between launches of the timelines go.
#   bash tools/h200/session14-b.sh
CALL=b SESSION=session14 CHECKS=0 \
  VARIANTS="ld10=session14-a-ld10.patch ld10h=session14-b-ld10h.patch lnf=session14-b-lnf.patch ld05lnf=session14-b-ld05lnf.patch ret0=session14-b-ret0.patch xonly=session14-b-xonly.patch" \
  TIMELINES="lnf:1" exec bash tools/h200/tma_session_check.sh
