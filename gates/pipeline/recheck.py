"""Gate "recheck": an accepted step's outputs checked again after its timing."""

from __future__ import annotations

from evo.core.records import Code, Verdict
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("recheck", order=80)
def recheck(s: Evidence) -> Verdict | None:
    """An accepted step's outputs checked again after its timing (the backend's own check)."""
    if not s.accepted:
        return None
    why = s.context.backend.recheck(s.loaded)
    return Verdict.rejected("correctness", f"after timing: {why}", Code.CORRECTNESS_RECHECK) if why else None
