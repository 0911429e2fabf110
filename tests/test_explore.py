"""Exploration for the surrogate (evo/search/explore.py): the prior draw has the model's own covariance, the posterior
draw the model's own mean and variance, the options decide which proposals are draws, and a stalled run restarts
away from the incumbent's basin."""

from __future__ import annotations

import numpy as np
import pytest

from evo.core.records import Attempt, Verdict
from evo.search import Surrogate, explore
from evo.search.surrogate import BIAS
from tests.test_proposer import FAM, GEOS, drive
from tests.test_surrogate import _judge


def _model(seed: int = 0):
    """A surrogate on the test family with every prior part on (a trend too), and some of its genomes."""
    sur = Surrogate(FAM, GEOS, {"fit": False, "effect": 0.3, "pairwise": 0.7, "ordinal": 1.0}, seed)
    sur._enumerate()
    assert sur._space is not None and sur.rank
    rng = np.random.default_rng(seed)
    return sur, sur._space[rng.choice(len(sur._space), 12, replace=False)], rng


def test_prior_draws_have_the_kernels_covariance():
    """The weights drawn (constant, knob values, value pairs, trends) give, over many draws, the covariance the
    model's kernel states: a feature missing or mis-sized would show here."""
    sur, genomes, rng = _model()
    draws = np.array([explore.prior_draw(sur, BIAS, rng)(genomes[:6]) for _ in range(6000)])
    emp = draws.T @ draws / len(draws)  # (prior mean 0)
    want = sur.kernel(genomes[:6], genomes[:6])
    assert np.abs(emp - want).max() < 0.08 * want.max(), (emp, want)


def test_posterior_draws_have_the_models_mean_and_variance():
    """Matheron's rule: draws conditioned on measured genomes average to the model's posterior mean, and spread by
    its posterior variance (measured genomes tight, others wide)."""
    sur, genomes, rng = _model(1)
    codes, cand = genomes[:8], genomes[8:]
    y = rng.normal(0.0, 0.3, len(codes))
    draws = np.array([explore.posterior_draw(sur, codes, y, genomes, BIAS, rng) for _ in range(3000)])
    mean, var = sur.predict(codes, y, genomes)
    assert np.abs(draws.mean(axis=0) - mean).max() < 0.05
    assert np.allclose(draws.var(axis=0), var, rtol=0.15, atol=2e-3), (draws.var(axis=0), var)
    assert draws[:, 8:].var(axis=0).min() > 5 * draws[:, :8].var(axis=0).max()
    assert len(cand) == 4


def _attempt(i: int, score: float | None, kind: str = "accepted") -> Attempt:
    a = Attempt(i, "t", FAM.name, {}, f"g{i}", "test", [])
    a.score = score
    a.verdict = Verdict.accepted("faster") if kind == "accepted" else Verdict.rejected("perf", "not faster")
    return a


def test_which_proposals_are_draws():
    """`thompson` k: every k-th attempt; `thompson_stall` n: once n attempts in a row did not beat the best, until
    one does."""
    runs = [_attempt(0, 1.0), _attempt(1, 0.9, "rejected"), _attempt(2, None, "rejected")]
    assert explore.since_best(runs) == 2
    assert explore.use_draw(0, 2, runs) and not explore.use_draw(0, 3, runs)
    assert explore.since_best([*runs, _attempt(3, 1.2)]) == 0
    assert [explore.use_draw(3, 0, runs[:n]) for n in range(4)] == [False, False, True, False]
    assert not explore.use_draw(0, 0, runs)


def test_the_surrogate_proposes_draws_seeded_and_valid():
    """With `thompson` 1 every model proposal is a draw's best genome: named so, never a repeat, never invalid, the
    same run for a seed and another run for another seed (a draw per seed, where expected improvement ties)."""
    runs = {}
    for seed in (0, 0, 1, 2):
        sur = Surrogate(FAM, GEOS, {"thompson": 1}, seed)
        attempts, props, _ = drive(sur, FAM, 15, seed=0, judge=_judge)
        keys = [p.genome.key for p in props]
        assert len(set(keys)) == len(keys)
        assert sum("posterior draw" in p.origin for p in props) >= 10
        runs.setdefault(seed, []).append(keys)
    assert runs[0][0] == runs[0][1]
    assert len({tuple(r[0]) for r in runs.values()}) >= 2


@pytest.mark.parametrize("opts", [{"thompson": 2, "local": 0.5}, {"thompson_stall": 5, "local": 1.0}])
def test_draws_need_the_weight_space_model(opts):
    with pytest.raises(ValueError, match="local"):
        Surrogate.validate_options(opts)


def test_far_from_needs_half_the_knobs_changed():
    cand = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [0, 0, 5, 5]])
    assert explore.far_from(cand, np.zeros(4, dtype=np.int64), [0, 1, 2, 3]).tolist() == [0, 1, 0, 1, 1]
    assert explore.far_from(cand, np.zeros(4, dtype=np.int64), [2, 3]).tolist() == [0, 0, 0, 1, 1]


def test_restart_keeps_the_far_candidates_once_stalled():
    """Before the stall every candidate; after it only the far ones (all, when none is far); off at 0."""
    cand = np.array([[0, 0], [0, 1], [1, 1], [2, 2]])
    bonus = np.arange(4.0)
    best = np.array([0, 0])
    stalled = [_attempt(0, 1.0), *[_attempt(i, 0.5, "rejected") for i in range(1, 4)]]
    c, b, why = explore.restart(cand, bonus, best, [0, 1], (0, 3), stalled[:3])
    assert why == ""
    assert len(c) == 4
    c, b, why = explore.restart(cand, bonus, best, [0, 1], (0, 3), stalled)
    assert "restart far" in why
    assert c.tolist() == [[0, 1], [1, 1], [2, 2]] and b.tolist() == [1.0, 2.0, 3.0]
    assert len(explore.restart(cand, bonus, best, [0, 1], (0, 0), stalled)[0]) == 4
    assert len(explore.restart(cand[:1], bonus[:1], best, [0, 1], (0, 3), stalled)[0]) == 1


def test_neighbours_come_first_once_stalled_then_far():
    """`neighbours`: the best genome's untried one-knob neighbours while any is left, before the far ones."""
    cand = np.array([[0, 1], [1, 1], [2, 0], [2, 2]])
    bonus = np.zeros(4)
    best = np.array([0, 0])
    stalled = [_attempt(0, 1.0), *[_attempt(i, 0.5, "rejected") for i in range(1, 4)]]
    assert explore.restart(cand, bonus, best, [0, 1], (2, 3), stalled)[0].tolist() == [[0, 1], [2, 0]]
    assert len(explore.restart(cand, bonus, best, [0, 1], (4, 0), stalled)[0]) == 4
    assert explore.restart(cand[[1, 3]], bonus[:2], best, [0, 1], (2, 3), stalled)[0].tolist() == [[1, 1], [2, 2]]


def _two_basins(g) -> tuple[None, float]:
    """A landscape on which nothing beats the baseline: every knob value off the baseline's is 10% slower, so a run
    stalls from its first proposal."""
    from tests.test_proposer import FAM as fam

    base = fam.baseline()
    changed = sum(g[k.name] != base[k.name] for k in fam.knobs if len(k.values) > 1)
    return None, 0.9**changed


def test_a_stalled_surrogate_proposes_far_from_the_best():
    """After `restart` attempts without improving on the baseline, every proposal differs from it in at least half
    of the knobs (without the option, the model keeps proposing near it)."""
    base = FAM.baseline()
    active = [k.name for k in FAM.knobs if len(k.values) > 1]

    def changed(p) -> int:
        return sum(p.genome[n] != base[n] for n in active)

    far = {}
    for stall in (0, 4):
        sur = Surrogate(FAM, GEOS, {"restart": stall}, 0)
        _, props, _ = drive(sur, FAM, 14, seed=0, judge=lambda g, rng: _two_basins(g))
        far[stall] = [changed(p) for p in props[6:]]
    assert min(far[4]) >= (len(active) + 1) // 2, far
    assert all("restart far from the best" in p.origin for p in props[6:])
    assert min(far[0]) < (len(active) + 1) // 2, far


def test_a_stalled_surrogate_tries_the_best_genomes_neighbours():
    """With `neighbours` 3, once three attempts have not beaten the baseline, the proposals are the baseline's
    one-knob neighbours (expected improvement alone proposes others among them)."""
    base = FAM.baseline()
    active = [k.name for k in FAM.knobs if len(k.values) > 1]
    steps = {}
    for stall in (0, 3):
        sur = Surrogate(FAM, GEOS, {"neighbours": stall}, 0)
        _, props, _ = drive(sur, FAM, 10, seed=0, judge=lambda g, rng: _two_basins(g))
        steps[stall] = [sum(p.genome[n] != base[n] for n in active) for p in props[3:]]
    assert steps[3] == [1] * len(steps[3]), steps
    assert all("one-knob neighbour of the best" in p.origin for p in props[3:])
    assert steps[0] != steps[3], steps
