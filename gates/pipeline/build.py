"""Gate "build": the machine code and ptxas's report, and the launch at every geometry."""

from __future__ import annotations

from evo.core.records import Verdict
from evo.core.variant import LaunchError
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("build", order=10)
def build(s: Evidence) -> Verdict | None:
    """NVRTC or nvcc (the builder given): the machine code and ptxas's report, and the launch at every geometry (the
    variant's identity, evo/core/variant.py). BuildError / IdeaError: error verdicts; so is a launch() that raises
    or gives no Launch (the family's code, recorded with its reason: the run goes on)."""
    built = s.built = s.context.builder.build(s.proposal.genome, s.source)
    a = s.attempt
    a.source_sha256, a.cubin_sha256, a.sass_sha256 = built.source_sha256, built.cubin_sha256, built.sass_sha256
    a.resources = {k: m.resources for k, m in built.modules.items()}
    a.compile_s = round(built.compile_s, 3)
    try:
        a.launch_sha256 = s.context.launch_sha256(s.proposal.genome)
    except LaunchError as e:
        return Verdict.error("launch", str(e), gate="static")
    return None
