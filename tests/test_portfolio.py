"""The surrogate's portfolio (evo/search/portfolio.py): with ``portfolio`` k, every k-th proposal after
``portfolio_start`` attempts is Optuna TPE's, fed the same attempts; seeded; off (0) by default, leaving the run as
it was."""

from __future__ import annotations

import random

import pytest

from evo.core.genome import Genome
from evo.search import TPE, Surrogate, portfolio
from tests.test_adaptive_screen import _attempt
from tests.test_proposer import FAM, GEOS, PICKY, drive
from tests.test_surrogate import _judge

TURN = "portfolio: "


def _keys(opts: dict, seed: int, n: int = 24) -> list[str]:
    return [p.genome.key for p in drive(Surrogate(PICKY, GEOS, opts, seed), PICKY, n, 0, _judge)[1]]


def test_every_kth_proposal_after_the_start_is_tpes():
    """``portfolio`` 3, ``portfolio_start`` 4: proposal i sees the baseline and i attempts, so TPE's turns are the
    proposals made after 4, 7, 10... attempts; every other proposal is the model's."""
    _, proposals, _ = drive(Surrogate(FAM, GEOS, {"portfolio": 3, "portfolio_start": 4}, 0), FAM, 16, 0, _judge)
    turns = [i for i, p in enumerate(proposals) if p.origin.startswith(TURN)]
    assert turns == [3, 6, 9, 12, 15]
    assert all(p.origin.startswith("surrogate") for i, p in enumerate(proposals) if i not in turns)


def test_a_turn_proposes_what_tpe_fed_the_same_attempts_proposes():
    """The portfolio's proposal is the ``tpe`` proposer's own: a TPE seeded as the surrogate seeds it (the draw after
    the model's generator's) and given the same attempts proposes the same genome."""
    seed = 5
    prop = Surrogate(FAM, GEOS, {"portfolio": 2, "portfolio_start": 6}, seed)
    attempts, proposals, _ = drive(prop, FAM, 7, 0, _judge)
    assert proposals[5].origin.startswith(TURN) and not proposals[4].origin.startswith(TURN)
    rng = random.Random(seed)
    rng.getrandbits(64)  # the surrogate's numpy generator
    tpe = TPE(FAM, GEOS, {}, rng.getrandbits(31))
    before = attempts[:6]  # the baseline and the model's five
    mine = tpe.propose(before, {a.genome_key for a in before})
    assert mine is not None and mine.genome.key == proposals[5].genome.key
    assert proposals[5].origin == TURN + mine.origin


def test_seeded():
    """The same seed makes the same run, TPE's turns included; another seed another run."""
    opts = {"portfolio": 2, "portfolio_start": 2}
    assert _keys(opts, 1) == _keys(opts, 1)
    assert _keys(opts, 1) != _keys(opts, 2)


def test_off_is_the_run_as_before():
    """0 (the default) draws nothing from the surrogate's generator: the run is the shipped one, seed for seed; on,
    it differs."""
    assert _keys({}, 3) == _keys({"portfolio": 0}, 3)
    assert _keys({}, 3) != _keys({"portfolio": 2, "portfolio_start": 2}, 3)


def test_a_genome_the_campaign_would_reject_is_not_proposed():
    """A TPE genome that ``rejected`` rules out (exact mode, an inexact knob) is not the proposal, and TPE is told it
    failed instead of waiting for it."""
    attempts, _, _ = drive(Surrogate(FAM, GEOS, {}, 0), FAM, 4, 0, _judge)
    p = portfolio.Portfolio(Surrogate(FAM, GEOS, {}, 0), 7)
    assert p.propose(attempts, {a.genome_key for a in attempts}, lambda g: True) is None
    assert not p.tpe()._pending
    ok = p.propose(attempts, {a.genome_key for a in attempts}, lambda g: False)
    assert ok is not None and ok.origin.startswith(TURN)


@pytest.mark.parametrize(
    "opts, msg",
    [
        ({"portfolio_start": 5}, "portfolio_start: works only with portfolio above 0"),
        ({"portfolio": -1}, "portfolio: "),
        ({"portfolio": 1.5}, "portfolio: "),
        ({"portfolio": 3, "screen": True}, "portfolio: not with screen"),
    ],
)
def test_options_are_checked(opts, msg):
    with pytest.raises(ValueError, match=msg) as e:
        Surrogate.validate_options(opts)
    assert "\n" not in str(e.value)
    Surrogate.validate_options({"portfolio": 3, "portfolio_start": 5})


def test_whose_turn():
    """TPE's turns: from ``start`` attempts on, every k-th; never the first after the baseline; interrupted
    attempts do not count; 0 is never."""
    runs = [_attempt(i) for i in range(9)]
    assert [portfolio.is_turn(3, 2, runs[:n]) for n in range(1, 10)] == [
        False, True, False, False, True, False, False, True, False,
    ]  # fmt: skip
    assert [portfolio.is_turn(2, 0, runs[:n]) for n in range(1, 5)] == [False, True, False, True]
    assert not any(portfolio.is_turn(0, 0, runs[:n]) for n in range(1, 10))
    assert not portfolio.is_turn(3, 2, [runs[0], _attempt(1, "interrupted")])


def test_a_turn_never_proposes_machine_code_already_measured():
    """TPE knows no machine code: on its turns the portfolio applies the model's rule (static_key set, a genome whose
    digest equals a measured genome's is not proposed), as tests/test_surrogate.py asserts of the model alone."""

    def digest(g):
        return f"vec{g['vec']}-unroll{g['unroll']}" if g["warp0_stream"] else Genome(g).key

    prop = Surrogate(FAM, GEOS, {"portfolio": 2, "portfolio_start": 2}, 5)
    prop.static_key = digest
    attempts, proposals, _ = drive(prop, FAM, 60, 5, _judge)
    assert sum(p.origin.startswith(TURN) for p in proposals) >= 10
    measured = {digest(Genome(attempts[0].genome))}
    for a in attempts[1:]:
        d = digest(Genome(a.genome))
        assert d not in measured, f"{a.genome_key} has the machine code of a measured genome"
        measured.add(d)
