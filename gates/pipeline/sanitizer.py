"""Gate "sanitizer": compute-sanitizer over an accepted step (gates/sanitizer.py, evo/measure/sanitize.py)."""

from __future__ import annotations

from evo.core.records import Verdict
from gates.judge import Evidence
from gates.registry import register_gate
from gates.sanitizer import judged


@register_gate("sanitizer", order=90)
def sanitizer(s: Evidence) -> Verdict | None:
    """compute-sanitizer over an accepted step, judged against the family's suppressions, before it becomes the
    champion. Running the tools is the campaign's (``JudgeContext.sanitize``: the config's tools and the log
    folder); the judging is here (``gates.sanitizer.judged``). The accepted verdict carries the record in
    ``detail["sanitizer"]``."""
    if not s.accepted:
        return None
    a = s.attempt
    res = judged(s.context.sanitize(a, s.source is not None), s.context.family.sanitizer_suppressions, dict(a.genome))
    if not res.verdict.ok:
        verdict: Verdict = res.verdict
        return verdict
    return Verdict.accepted(a.verdict.reason, {**a.verdict.detail, "sanitizer": res.record})
