"""Gate "sanitizer": compute-sanitizer over an accepted step (gates/sanitizer.py, evo/measure/sanitize.py)."""

from __future__ import annotations

from evo.core.records import Verdict
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("sanitizer", order=90)
def sanitizer(s: Evidence) -> Verdict | None:
    """compute-sanitizer over an accepted step, judged against the family's suppressions, before it becomes the
    champion. The run itself is the campaign's (``JudgeContext.sanitize``: the config's tools and the log folder)."""
    return s.context.sanitize(s.attempt, s.source is not None) if s.accepted else None
