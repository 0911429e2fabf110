#!/usr/bin/env bash
# Session 18 (2026-12-01): call b again (configs/fp4_matvec_pdl.yaml for 5 minutes, every part's graph sized for
# itself) with the proposer's seed 1 instead of 0, on whichever card the call gets: does the search reach the
# 16-row 8-warp genome and >= 80% of the copy ceiling again?
#   bash tools/h200/session18-c.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
sed 's/^seed: 0$/seed: 1/' configs/fp4_matvec_pdl.yaml > /tmp/fp4_matvec_pdl_seed1.yaml
grep -q '^seed: 1$' /tmp/fp4_matvec_pdl_seed1.yaml || exit 1
MINUTES=5 bash tools/h200/fp4_campaign.sh c /tmp/fp4_matvec_pdl_seed1.yaml
