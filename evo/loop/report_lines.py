"""The lines the campaign prints and the words it writes beside its timings, in one place.

Called by the loop and its set-up (evo/loop/campaign.py, baseline.py); each returns text, the caller prints it
through the campaign's ``out`` (which names simulated numbers as such, ``labelled``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evo.core.records import SIMULATED_LABEL
from gates import threshold


def labelled(out: Callable[[str], None], label: str = SIMULATED_LABEL) -> Callable[[str], None]:
    """``out`` with every line naming where its numbers come from (a simulated backend's campaign; ``label``:
    evo.core.records.simulated_label of its backend)."""

    def say(msg: str) -> None:
        out(f"{msg} ({label})")

    return say


def launches_note(launch: str, family: Any, parts: Sequence[tuple[str, Any]]) -> str:
    """'; launches: cand PDL, base plain' under gates.perf.launch = pdl (nothing under plain launches): only a
    kernel the family calls PDL-safe (Family.pdl_safe) is launched with PDL."""
    if launch == "plain":
        return ""
    return "; launches: " + ", ".join(f"{lb} {'PDL' if family.pdl_safe(ld.genome) else 'plain'}" for lb, ld in parts)


def floor_lines(floors: Mapping[str, float], floor: float, perf: Any) -> list[str]:
    """What the A/A noise floor means for this campaign's wins (``perf``: gates.perf), and a warning where it is
    above gates.perf.max_floor."""
    msg = ", ".join(f"{k} {v:.3%}" for k, v in floors.items())
    lines = [
        f"A/A noise floor: {msg}; a win needs > {threshold(perf.min_gain, floor):.4f}x "
        + ("on every weighted geometry" if perf.rule == "every" else "in the weighted mean of the weighted geometries")
    ]
    if floor > perf.max_floor:
        lines.append(
            f"warning: the noise floor {floor:.3%} is above gates.perf.max_floor {perf.max_floor:.3%}; "
            "wins must clear 3x the floor, so fewer will be found"
        )
    return lines


def resume_line(interrupted: Sequence[int]) -> str:
    return f"resume: {len(interrupted)} attempt(s) left running by a stopped process recorded as interrupted"


def recovered_line(worker: str, lost: Sequence[int]) -> str:
    return (
        f"worker {worker}: {len(lost)} attempt(s) of a stopped worker recorded as interrupted "
        f"({', '.join(f'#{n}' for n in lost)})"
    )


def dropped_line(worker: str, err: Exception) -> str:
    """An attempt recovered by another worker while this one measured it (taken for dead)."""
    return (
        f"worker {worker}: an attempt was recovered by another worker before it was "
        f"recorded ({err}); its result is dropped and its genome may be proposed again"
    )
