"""Gate "exact_rule": in exact mode, a knob or idea that changes the summation order is rejected unmeasured."""

from __future__ import annotations

from evo.core.records import Verdict
from gates.correctness import CorrectnessEvidence, correctness_gate
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("exact_rule", order=40)
def exact_rule(s: Evidence) -> Verdict | None:
    """Exact mode: a knob (or idea) that changes the summation order is rejected before any GPU time. Leaves the
    inexact knobs per geometry in ``s.inexact`` for the correctness gate either way."""
    ctx, genome = s.context, s.proposal.genome
    s.inexact = {g.name: ctx.family.inexact_knobs(genome, g) + ctx.inexact_ideas(genome) for g in ctx.config.geometries}
    if ctx.config.gates.correctness.mode == "exact" and any(s.inexact.values()):
        return correctness_gate(CorrectnessEvidence(), {}, "exact", s.inexact)
    return None
