"""Bound gate: how much decode can gain from a kernel step, given the kernel's share of decode time.

For a step with kernel speedup k on a kernel whose share of the *remaining*
decode time is s, decode can speed up by at most

    B = 1 / (1 - s * (1 - 1/k))

Shares move as steps land: after earlier steps with cumulative speedup K,
a kernel that first took s0 of decode takes s = (s0/K) / (1 - s0 + s0/K).
A step whose B - 1 is under the decode noise floor is kept as "kernel-only,
no end-to-end claim": its kernel gain is real, its decode gain unmeasurable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


def share_after(s0: float, cumulative: float) -> float:
    """The kernel's share of decode once it runs ``cumulative`` times faster than at profiling."""
    rest = s0 / cumulative
    return rest / (1.0 - s0 + rest)


def step_bound(share: float, k: float) -> float:
    return 1.0 / (1.0 - share * (1.0 - 1.0 / k))


@dataclass
class BoundVerdict:
    share: float  # kernel share of the remaining decode time before this step
    kernel_speedup: float  # k of this step
    bound: float  # B: the most decode can speed up from this step
    cumulative_kernel: float  # K after this step
    predicted_decode: float  # decode speedup the whole chain so far allows
    claim: bool  # False: B - 1 is under the decode noise floor
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bound_gate(s0: float, previous_cumulative: float, k: float, decode_floor: float) -> BoundVerdict:
    s = share_after(s0, previous_cumulative)
    b = step_bound(s, k)
    cum = previous_cumulative * k
    pred = 1.0 / (1.0 - s0 + s0 / cum)
    claim = (b - 1.0) >= decode_floor
    if claim:
        summary = (
            f"step bound +{(b - 1) * 100:.2f}% decode (kernel share {s:.1%} of the remaining decode time, "
            f"kernel {k:.3f}x); chain so far predicts +{(pred - 1) * 100:.2f}%"
        )
    else:
        summary = (
            f"kernel-only, no end-to-end claim: step bound +{(b - 1) * 100:.2f}% is under the decode noise "
            f"floor {decode_floor:.2%} (kernel share {s:.1%}, kernel {k:.3f}x)"
        )
    return BoundVerdict(s, k, b, cum, pred, claim, summary)
