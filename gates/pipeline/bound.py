"""Gate "bound": the share-derived decode bound of an accepted step (gates/bound.py)."""

from __future__ import annotations

from typing import Any

from evo.core.records import Attempt, Verdict
from gates.bound import bound_gate
from gates.judge import Evidence, JudgeContext
from gates.registry import register_gate


@register_gate("bound", order=100)
def bound(s: Evidence) -> Verdict | None:
    """The share-derived decode bound of an accepted step, kept on the attempt (it says whether to claim the step end
    to end). Never rejects."""
    if s.accepted:
        s.attempt.bound = decode_bound(s.context, s.attempt)
    return None


def decode_bound(ctx: JudgeContext, a: Attempt) -> dict[str, Any] | None:
    """The share-derived decode bound of an accepted step, or None when the config asks for none."""
    b = ctx.config.bound
    if b is None:
        return None
    prof = ctx.load_profile(b.profile)
    floor = b.noise_floor if b.noise_floor is not None else prof.decode_noise_floor
    champ = ctx.champion or ctx.baseline
    prev = champ.speedup_vs_baseline.get(b.geometry) if champ else None
    k = a.speedup_vs_parent[b.geometry].value
    v = bound_gate(prof.share(b.kernel), prev.value if prev else 1.0, k, floor)
    return {
        **v.to_dict(),
        "geometry": b.geometry,
        "profile": str(b.profile),
        "decode_floor": floor,
        "observed": None,
    }
