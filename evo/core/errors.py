"""The error a family's loading and its hooks raise: its own module, so that evo/core/family.py and
evo/core/hooks.py (which watches the family's code) both take it without importing each other."""

from __future__ import annotations


class FamilyError(Exception):
    """A family cannot be found or loaded (one line, shown to the user)."""
