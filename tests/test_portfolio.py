"""The surrogate's portfolio (evo/search/portfolio.py): with ``portfolio`` k, every k-th proposal after
``portfolio_start`` attempts is Optuna TPE's, fed the same attempts; seeded; on by default (3 from the 30th, session
32), off with 0 or a screen."""

from __future__ import annotations

import random

import pytest

from evo.core.genome import Genome
from evo.core.records import Code, Verdict
from evo.search import Surrogate, portfolio
from evo.search.portfolio_tpe import FailAwareTPE, worst_for_failures
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
    """The portfolio's proposal is its TPE's (the ``tpe`` proposer told failures as the worst speed): one seeded as the
    surrogate seeds it (the draw after the model's generator's) and given the same attempts proposes the same genome."""
    seed = 5
    prop = Surrogate(FAM, GEOS, {"portfolio": 2, "portfolio_start": 6}, seed)
    attempts, proposals, _ = drive(prop, FAM, 7, 0, _judge)
    assert proposals[5].origin.startswith(TURN) and not proposals[4].origin.startswith(TURN)
    rng = random.Random(seed)
    rng.getrandbits(64)  # the surrogate's numpy generator
    tpe = FailAwareTPE(FAM, GEOS, {}, rng.getrandbits(31))  # (TPE itself while nothing failed)
    before = attempts[:6]  # the baseline and the model's five
    mine = tpe.propose(before, {a.genome_key for a in before})
    assert mine is not None and mine.genome.key == proposals[5].genome.key
    assert proposals[5].origin == TURN + mine.origin


def test_seeded():
    """The same seed makes the same run, TPE's turns included; another seed another run."""
    opts = {"portfolio": 2, "portfolio_start": 2}
    assert _keys(opts, 1) == _keys(opts, 1)
    assert _keys(opts, 1) != _keys(opts, 2)


def test_on_by_default_off_is_the_run_as_before():
    """The default is every third proposal from the 30th attempt on; 0 draws nothing from the surrogate's generator, so
    before the 30th attempt the runs are the same, seed for seed, and after it they differ."""
    assert _keys({}, 3, 40) == _keys({"portfolio": 3, "portfolio_start": 30}, 3, 40)
    assert _keys({}, 3, 29) == _keys({"portfolio": 0}, 3, 29)  # proposal 29 follows the baseline and 29 attempts
    assert _keys({}, 3, 40) != _keys({"portfolio": 0}, 3, 40)


def test_a_screen_turns_the_default_off():
    """``screen`` measures one-knob changes first, which TPE's turns would interrupt: with it the default portfolio
    is off (the run is the one with ``portfolio`` 0), and asking for both is refused."""
    screen = {"screen": True}
    Surrogate.validate_options(screen)
    assert _keys(screen, 3, 40) == _keys({**screen, "portfolio": 0}, 3, 40)


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
        ({"portfolio": 0, "portfolio_start": 5}, "portfolio_start: works only with portfolio above 0"),
        ({"screen": True, "portfolio_start": 5}, "portfolio_start: works only with portfolio above 0"),
        (
            {"screen": True, "portfolio_start": 30},
            "portfolio_start: works only with portfolio above 0",
        ),  # (the default)
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


def test_tpe_counts_a_failure_as_the_worst_speed():
    """Optuna's TPE leaves failed trials out of its densities, so it would keep sampling where genomes fail: the
    portfolio's TPE is told a failed genome as measured at the worst speed so far; a genome rejected for machine
    code measured before, an interrupted one, or one exact mode refused for an inexact knob, is no failure."""
    attempts, _, _ = drive(Surrogate(FAM, GEOS, {"portfolio": 0}, 0), FAM, 5, 0, _judge)
    attempts[1].score = 0.5
    attempts[2].score, attempts[2].verdict = None, Verdict.error("compile", "made-up")
    attempts[3].score, attempts[3].verdict = None, Verdict.rejected("static", "same SASS", Code.STATIC_IDENTICAL_SASS)
    attempts[4].score, attempts[4].verdict = None, Verdict.error("interrupted", "the campaign stopped")
    inexact = Verdict.rejected("correctness", "unroll changes the order", Code.CORRECTNESS_INEXACT_KNOB)
    attempts[5].score, attempts[5].verdict = None, inexact
    told = worst_for_failures(attempts)
    assert [a.score for a in told] == [attempts[0].score, 0.5, 0.5, None, None, None]
    attempts = attempts[:4]  # (what TPE's study is told of the first four)
    assert attempts[2].score is None  # copies: the ledger's attempts are not changed
    tpe = FailAwareTPE(FAM, GEOS, {}, 0)
    tpe.propose(attempts, {a.genome_key for a in attempts})
    values = sorted(t.value for t in tpe.study.trials if t.state.name == "COMPLETE")
    assert values == sorted([attempts[0].score, 0.5, 0.5])
