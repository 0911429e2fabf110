"""Gate "e2e": an accepted step observed end to end, held against its bound (evo/measure/e2e.py)."""

from __future__ import annotations

from evo.core.records import Verdict
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("e2e", order=110)
def e2e(s: Evidence) -> Verdict | None:
    """Champion and candidate decode interleaved (``JudgeContext.e2e``: the campaign's engine command and its frozen
    baseline); a changed token stream rejects the step."""
    if s.accepted and s.attempt.bound is not None and s.context.config.e2e is not None:
        s.context.e2e(s.attempt)
        return s.attempt.verdict if not s.attempt.verdict.ok else None
    return None
