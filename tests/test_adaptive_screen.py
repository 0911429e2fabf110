"""The adaptive screen (evo/search/adaptive_screen.py): ``screen_values`` bounds the values screened per knob,
``screen_every`` interleaves the screen with the model's own proposals, both need ``screen`` and leave the screen as
it was when 0."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from evo.core.genome import Genome
from evo.core.records import Attempt, Verdict
from evo.search import Surrogate, adaptive_screen
from tests.test_proposer import FAM, GEOS, drive
from tests.test_surrogate import _judge

SCREEN = "surrogate screen"


def _changed_knob(g: Genome) -> str | None:
    """The one knob a genome changes from the test family's baseline (None: not a one-knob change)."""
    diff = g.diff(FAM.baseline())
    return next(iter(diff)) if len(diff) == 1 else None


def _neighbours_per_knob() -> Counter:
    """How many valid one-knob changes of the baseline each knob of the test family has."""
    base = FAM.baseline()
    out: Counter = Counter()
    for k in FAM.knobs:
        for v in k.values:
            if v != base[k.name] and FAM.check(base.replace(**{k.name: v}), GEOS) is None:
                out[k.name] += 1
    return out


@pytest.mark.parametrize("values", [1, 2])
def test_screen_values_screens_at_most_that_many_values_per_knob(values):
    """``screen_values`` m: the proposals after the baseline are one-knob changes of it, m per knob (all of a knob's
    when it has fewer), then the model leads; the plain screen would still be screening then."""
    per_knob = _neighbours_per_knob()
    want = {k: min(values, n) for k, n in per_knob.items()}
    prop = Surrogate(FAM, GEOS, {"screen": True, "screen_values": values}, 0)
    _, proposals, _ = drive(prop, FAM, sum(want.values()) + 6, 0, _judge)
    n = sum(want.values())
    screened = proposals[:n]
    assert all(p.origin.startswith(SCREEN) for p in screened)
    assert Counter(_changed_knob(p.genome) for p in screened) == want
    assert not any(p.origin.startswith(SCREEN) for p in proposals[n:])
    assert n < sum(per_knob.values())  # (the bound bites: the full screen is longer on this family)


def test_screen_every_interleaves_the_screen_with_the_model():
    """``screen_every`` 2: the first proposal after the baseline is the screen's, then every other one, until every
    one-knob change of the baseline was tried; the others are the model's over the whole space."""
    total = sum(_neighbours_per_knob().values())
    prop = Surrogate(FAM, GEOS, {"screen": True, "screen_every": 2}, 0)
    _, proposals, _ = drive(prop, FAM, 2 * total + 4, 0, _judge)
    is_screen = [p.origin.startswith(SCREEN) for p in proposals]
    assert all(_changed_knob(p.genome) for p, s in zip(proposals, is_screen) if s)
    first_model = [p for p, s in zip(proposals, is_screen) if not s][: total // 2]
    assert any(_changed_knob(p.genome) is None for p in first_model)  # the model goes beyond the neighbours
    # every second proposal is the screen's while it lasts; the model's own may also pick a one-knob change, so
    # the screen ends before 2 x total proposals
    last = max(i for i, s in enumerate(is_screen) if s)
    assert is_screen[0 : last + 1 : 2] == [True] * (last // 2 + 1)
    assert not any(is_screen[1 : last + 1 : 2])
    assert not any(is_screen[last + 1 :])
    tried = {p.genome.key for p in proposals}
    base = FAM.baseline()
    assert all(
        base.replace(**{k.name: v}).key in tried
        for k in FAM.knobs
        for v in k.values
        if v != base[k.name] and FAM.check(base.replace(**{k.name: v}), GEOS) is None
    )


def test_zero_is_the_screen_as_before():
    """0 (the default) leaves the screen's run seed for seed as it was."""
    runs = [
        [p.genome.key for p in drive(Surrogate(FAM, GEOS, opts, 3), FAM, 20, 0, _judge)[1]]
        for opts in ({"screen": True}, {"screen": True, "screen_values": 0, "screen_every": 0})
    ]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("name", ["screen_values", "screen_every"])
def test_needs_screen(name):
    with pytest.raises(ValueError, match=f"{name}: works only with screen: true"):
        Surrogate.validate_options({name: 2})
    Surrogate.validate_options({name: 2, "screen": True})


def _attempt(i: int, kind: str = "accepted") -> Attempt:
    a = Attempt(i, "t", FAM.name, {}, f"g{i}", "test", [])
    a.score = 1.0
    a.verdict = Verdict.accepted("faster") if kind == "accepted" else Verdict.error("interrupted", "not evaluated")
    return a


def test_whose_turn():
    """The screen's turns: after the baseline, then every k-th attempt; interrupted attempts do not count."""
    runs = [_attempt(i) for i in range(7)]
    assert [adaptive_screen.is_turn(3, runs[:n]) for n in range(1, 8)] == [True, False, False, True, False, False, True]
    assert all(adaptive_screen.is_turn(e, runs[:n]) for e in (0, 1) for n in range(1, 8))
    assert not adaptive_screen.is_turn(3, [runs[0], _attempt(1, "interrupted"), runs[2]])


def test_within_values_counts_the_tried_one_knob_changes_per_knob():
    """A knob is done once ``values`` of its one-knob changes of the baseline were tried (failed ones count); genomes
    that change two knobs count for none."""
    base = (0, 0, 0)
    near = np.array([(1, 0, 0), (2, 0, 0), (0, 1, 0), (0, 2, 0), (0, 0, 1)])
    tried = [(0, 0, 0), (3, 0, 0), (0, 3, 0), (0, 4, 0), (1, 0, 1)]
    assert adaptive_screen.within_values(near, base, tried, 1).tolist() == [[0, 0, 1]]
    assert adaptive_screen.within_values(near, base, tried, 2).tolist() == [[1, 0, 0], [2, 0, 0], [0, 0, 1]]
    assert adaptive_screen.within_values(near, base, tried, 0).tolist() == near.tolist()
