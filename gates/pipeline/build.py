"""Gate "build": the machine code and ptxas's report, and the launch at every geometry."""

from __future__ import annotations

from evo.core.records import Verdict
from evo.core.variant import LaunchError
from gates.judge import Evidence, record_build
from gates.registry import register_gate


@register_gate("build", order=10)
def build(s: Evidence) -> Verdict | None:
    """NVRTC or nvcc (the builder given): the machine code and ptxas's report, and the launch at every geometry (the
    variant's identity, evo/core/variant.py). BuildError / IdeaError: error verdicts; so is a launch() that raises
    or gives no Launch (the family's code, recorded with its reason: the run goes on)."""
    s.built = s.context.builder.build(s.proposal.genome, s.source)
    a = s.attempt
    record_build(a, s.built)
    try:
        a.launch_sha256 = s.context.launch_sha256(s.proposal.genome)
    except LaunchError as e:
        return Verdict.error("launch", str(e), gate="static")
    return None
