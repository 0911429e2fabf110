"""Gate "static": registers and spills against the baseline's (gates/static.py)."""

from __future__ import annotations

from evo.core.records import Verdict
from gates.judge import Evidence
from gates.registry import register_gate
from gates.static import static_gate


@register_gate("static", order=20)
def static(s: Evidence) -> Verdict | None:
    """Registers, spills and stack frame (ptxas's report of the build) against the baseline's and the config's limits.
    Called after the build."""
    st = s.context.config.gates.static
    v = static_gate(s.attempt.resources, dict(s.context.base_resources), st.max_registers, st.allow_new_spills)
    return None if v.ok else v
