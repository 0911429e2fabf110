"""The surrogate's screen (option ``screen``: the baseline's one-knob changes measured first), and two ways to make it
adaptive (issue 42 item 5, session 30): screen only while it pays.

The full screen measures every one-knob change of the baseline before the model leads. On convolution_A4000 (a
development cache) that is what finds the best basin (31 evaluations on every seed, against 260 without it: the
model's first proposals climb the ``use_shmem`` 1 basin), but it costs the sum over the knobs of their values less
one: 45 evaluations on pnpoly_RTX_Titan, whose ``block_size_x`` alone has 31 values, and there and on two other
development caches no run came within 2% of the best in 150 (docs/search-efficiency.md, "Exploration (session
29)"). Most of that cost is one knob's values walked one by one along the model's trend (on A4000, 14 of its 28
screen attempts are ``block_size_x`` values). Two options bound it:

- ``screen_values`` m: at most m values of each knob are screened (the best expected improvement first; a knob
  whose m one-knob changes of the baseline were tried is done), so the screen costs at most m x the knobs, and
  each knob's own effect is still seen before the model combines them.
- ``screen_every`` k: the screen takes only every k-th attempt, the others go to expected improvement over the
  whole space as without a screen; so the screen's evidence arrives while the model already leads, and a space
  the model solves alone is not delayed by the whole screen.

Both are off by default (0: the screen as before), need ``screen: true``, and read only the attempts (the tried
genomes and their number), so a proposal made ahead of its predecessor's result (compile-ahead) is decided the same
way on every run; under that lag a knob can get one value more than ``screen_values`` says (the predecessor, still
pending, is not among the attempts). Called by ``Surrogate.propose`` once per proposal, through :func:`candidates`.

On the development caches (docs/search-efficiency.md, "Adaptive screen (session 30)") ``screen_values`` 1 is
better than the shipped search on four of eight (A4000 260 -> 13.5, mi50 no run within 2% -> 90.5) and worse on
four (RTX 2080 Ti 13.5 -> 574: its baseline sits in a corner whose one-knob changes mislead the model), so
neither option is a default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from evo.core.family import Family, Knob
from evo.core.genome import Genome
from evo.core.records import Attempt
from evo.search.base import Option

OPTIONS = {
    "screen": Option(
        False,
        "first measure every one-knob change of the baseline (best expected improvement first), so that each "
        "knob value's own effect is seen once before the model combines them",
    ),
    # both off: docs/search-efficiency.md, "Adaptive screen (session 30)", has the development numbers
    "screen_values": Option(
        0,
        "with screen: measure at most this many values of each knob (best expected improvement first), so that a "
        "knob with many values does not hold the screen (0: all of them)",
        0,
        64,
    ),
    "screen_every": Option(
        0,
        "with screen: screen only every this many attempts, the others chosen by expected improvement over the "
        "whole space as without a screen, until the screen is done (0 or 1: every attempt)",
        0,
        64,
    ),
}


class Model(Protocol):
    """What the screen needs of the surrogate (evo/search/surrogate.py ``Surrogate``)."""

    active: list[int]
    levels: list[int]
    knobs: list[Knob]
    _space: np.ndarray | None
    family: Family

    def code(self, genome: Mapping[str, object]) -> tuple[int, ...] | None: ...

    def genome_of(self, code: Sequence[int]) -> Genome: ...

    def valid(self, genome: Genome, seen: set[str]) -> bool: ...

    def _is_inexact(self, genome: Mapping[str, object]) -> bool: ...


def validate(given: Callable[[str], object]) -> None:
    """The combinations that would not do what they say (``given(name)``: the option's value or default)."""
    for name in ("screen_values", "screen_every"):
        if given(name) and not given("screen"):
            raise ValueError(f"{name}: works only with screen: true (screen is false here)")


def is_turn(every: int, attempts: Sequence[Attempt]) -> bool:
    """Whether this proposal may be a screen's: the first after the baseline, then every ``every``-th, counting the
    attempts made (interrupted ones not); always when ``every`` is 0 or 1."""
    if every <= 1:
        return True
    done = sum(a.verdict.kind != "interrupted" for a in attempts)
    return (done - 1) % every == 0


def baseline_neighbours(model: Model, cand: np.ndarray, seen: set[str], mode: str | None) -> np.ndarray:
    """The untried one-knob changes of the baseline that may be proposed (the screen's candidates)."""
    base = model.code(model.family.baseline())
    if base is None:
        return cand[:0]
    if model._space is not None and len(model._space):  # enumerated: the candidates hold every valid untried genome
        diff = (cand != np.array(base)).sum(axis=1)
        return cand[diff == 1]
    out = []
    for i in model.active:
        for v in range(model.levels[i]):
            if v == base[i]:
                continue
            c = list(base)
            c[i] = v
            g = model.genome_of(c)
            if model.valid(g, seen) and not (mode == "exact" and model._is_inexact(g)):
                out.append(c)
    return np.array(out, dtype=np.int64).reshape(len(out), len(model.knobs))


def within_values(near: np.ndarray, base: Sequence[int], tried: Sequence[tuple[int, ...]], values: int) -> np.ndarray:
    """The screen's candidates (one-knob changes of ``base``) whose knob has had fewer than ``values`` of its
    one-knob changes tried (0: all of them)."""
    if not values or not len(near):
        return near
    b = np.array(base)
    done = np.zeros(len(b), dtype=np.int64)
    for c in set(tried):
        off = np.flatnonzero(np.array(c) != b)
        if len(off) == 1:
            done[off[0]] += 1
    knob = np.argmax(near != b, axis=1)  # the one knob each candidate changes
    return near[done[knob] < values]


def candidates(
    model: Model,
    cand: np.ndarray,
    seen: set[str],
    mode: str | None,
    tried: Sequence[tuple[int, ...]],
    attempts: Sequence[Attempt],
    values: int,
    every: int,
) -> np.ndarray:
    """The screen's candidates for this proposal: empty when it is not the screen's turn (``every``) or none is
    left (the screen is done); else the untried one-knob changes of the baseline within ``values`` per knob."""
    if not is_turn(every, attempts):
        return cand[:0]
    near = baseline_neighbours(model, cand, seen, mode)
    base = model.code(model.family.baseline())
    return near if base is None else within_values(near, base, tried, values)
