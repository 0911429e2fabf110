"""The campaign loop (campaign.py: ``evo run``) and what it stands on (seams.py, baseline.py, modules.py, checks.py,
budget.py, shared.py, campaign_ideas.py, attempt.py, report_lines.py, errors.py), the same loop on a shared ledger
(workers.py: ``evo worker``), compile ahead (prefetch.py), and the commands that run the loop into a side study:
replay.py (``evo replay``) and selfcheck.py (``evo selfcheck``); ablate.py (``evo ablate``)."""
