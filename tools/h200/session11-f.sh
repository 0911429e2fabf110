#!/usr/bin/env bash
# Session 11, call f, on nvidia-h200 (2026-12-01): a block's last item in 7 parts on their own mbarriers, asked
# for in order, the consumers following them as they land (session11-f-lp3.patch: lp3; peeled after the item loop,
# x's B from shared memory there: 128 registers, no spills, where the in-loop forms spilled), 2 and 3 stages, and
# lp0 (its code with the parts off: the structure alone) beside the working tree's kernel (family.py with 64 more
# bytes for the parts' mbarriers); racecheck of lp3 at in7168_out7168_bf16.
#   bash tools/h200/session11-f.sh
CALL=f SESSION=session11 CHECKS=0 VARIANTS="lp3=session11-f-lp3.patch lp0=session11-f-lp3.patch,session11-f-lp0.patch" \
  RACE="lp3" exec bash tools/h200/tma_session_check.sh
