"""The campaign loop (campaign.py: ``evo run``), the same loop on a shared ledger (workers.py: ``evo worker``),
compile ahead (prefetch.py), and the commands that run the loop into a side study: replay.py (``evo replay``) and
selfcheck.py (``evo selfcheck``)."""
