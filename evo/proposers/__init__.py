"""The old path of the search strategies, now evo/search/: kept only so that ``python -m evo.proposers.rules`` in
users' configs (``ideas.proposer.command``) keeps working (evo/proposers/rules.py)."""
