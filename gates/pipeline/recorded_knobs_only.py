"""Gate "recorded_knobs_only": a recorded sweep measures knob genomes only."""

from __future__ import annotations

from evo.core.records import Verdict
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("recorded_knobs_only", order=50)
def recorded_knobs_only(s: Evidence) -> Verdict | None:
    """On a simulated backend, a source-level variant (ideas, faults) is an error: nothing recorded measures it."""
    if (s.source is not None or s.context.uses_ideas(s.proposal.genome)) and s.context.simulated:
        return Verdict.error(
            "not_recorded",
            "source-level variants (ideas, faults) need a GPU: the recorded sweep only holds knob genomes",
            gate="correctness",
        )
    return None
