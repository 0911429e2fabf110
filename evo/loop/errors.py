"""The campaign's one error for users, raised by the loop and its set-up (evo/loop/seams.py, baseline.py)."""

from __future__ import annotations


class CampaignError(Exception):
    """The campaign cannot start (one line for the user)."""
