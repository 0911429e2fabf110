"""The surrogate proposer: deterministic per seed, never a repeat, only valid genomes, tabu and the exact-mode rule
honoured, identical machine code screened out, fast, and clearly better than random search on the recorded sweep."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from evo.core.family import Family, Geometry, Knob, Launch, OutputSpec
from evo.core.genome import Genome
from evo.core.records import Attempt, Verdict
from evo.search import PROPOSERS, Surrogate
from gates.correctness import CorrectnessEvidence, correctness_gate
from tests.test_proposer import FAM, GEOS, PICKY, TINY_GEO, _baseline_attempt, _tiny, drive


def _landscape(g: Mapping[str, Any]) -> float:
    """A made-up speed landscape on mhc_pre_big_fuse's knobs (multiplicative, with one interaction)."""
    s = {128: 1.3, 256: 1.0, 512: 0.8}[g["block"]] * (1.4 if g["barrier"] == "early" else 1.0)
    s *= 1.2 if g["meta"] == "slice" else 1.0
    s *= {1: 1.0, 2: 1.1, 4: 0.9, 8: 0.7}[g["h_split"]] * (1.1 if g["vec"] == 8 and g["unroll"] == 2 else 1.0)
    return s


def _judge(g, rng):
    return None, _landscape(g)


@pytest.mark.parametrize("seed", [0, 1])
def test_never_repeats_never_invalid(seed):
    prop = Surrogate(PICKY, GEOS, {}, seed)
    attempts, proposals, stopped = drive(prop, PICKY, 120, seed)
    assert not stopped and len(proposals) == 120
    keys = [a.genome_key for a in attempts]
    assert len(keys) == len(set(keys)), "a genome was proposed twice"
    for p in proposals:
        assert PICKY.check(p.genome, GEOS) is None, (p.genome, PICKY.check(p.genome, GEOS))
        assert set(p.genome) == {k.name for k in FAM.knobs}
        assert all(p.genome[k.name] in k.values for k in FAM.knobs)
        assert p.origin.startswith(("surrogate: ", "portfolio: "))  # the default portfolio's turns from the 30th


def test_constraints_bite():
    # Guard for the test above: without the made-up rules, the same run does propose such genomes.
    _, proposals, _ = drive(Surrogate(FAM, GEOS, {}, 0), FAM, 200, 0)
    assert any(PICKY.check(p.genome, GEOS) for p in proposals)


def test_deterministic_per_seed():
    def run(seed):
        return [p.genome.key for p in drive(Surrogate(FAM, GEOS, {}, seed), FAM, 25, 3, _judge)[1]]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_respects_tabu():
    prop = Surrogate(FAM, GEOS, {}, 3, tabu={"split_reduce": ["warp"], "block": [128]})
    _, proposals, _ = drive(prop, FAM, 100, 3, _judge)
    assert proposals
    assert all(p.genome["split_reduce"] != "warp" and p.genome["block"] != 128 for p in proposals)
    _, proposals, _ = drive(Surrogate(FAM, GEOS, {}, 3), FAM, 100, 3, _judge)
    assert any(p.genome["block"] == 128 for p in proposals)  # not vacuous: block 128 is the fast value


def test_exact_mode_shows_and_rules_out_every_inexact_genome():
    """Once the campaign rejected a genome for changing the summation order, no genome with an inexact knob comes
    (the campaign would reject each before the GPU), not only the rejected value (which is all the tabu holds)."""
    geos = [Geometry("T4096_H4096", {"T": 4096, "H": 4096, "S": 1, "prenorm": True}, 1.0)]  # block, vec inexact
    fam = FAM
    rejected = fam.baseline().replace(block=512)
    assert fam.inexact_knobs(rejected, geos[0]) == ["block"]
    base = _baseline_attempt(fam)
    a1 = Attempt(
        1,
        "t",
        fam.name,
        dict(rejected),
        rejected.key,
        "x",
        verdict=correctness_gate(CorrectnessEvidence(), {}, "exact", {"T4096_H4096": ["block"]}),
    )
    prop = Surrogate(fam, geos, {}, 0, tabu={"block": [512]})
    attempts, seen = [base, a1], {base.genome_key, a1.genome_key}
    for _ in range(40):
        p = prop.propose(attempts, seen)
        assert not fam.inexact_knobs(p.genome, geos[0]), p.genome
        a = Attempt(
            len(attempts),
            "t",
            fam.name,
            dict(p.genome),
            p.genome.key,
            p.origin,
            verdict=Verdict.rejected("perf", "x"),
            score=_landscape(p.genome),
        )
        attempts.append(a)
        seen.add(a.genome_key)
    # In tolerance mode (an inexact genome was measured) they come back.
    t = fam.baseline().replace(block=128)
    a2 = Attempt(2, "t", fam.name, dict(t), t.key, "x", verdict=Verdict.rejected("perf", "x"), score=1.3)
    prop = Surrogate(fam, geos, {}, 0)
    attempts, seen = [base, a2], {base.genome_key, a2.genome_key}
    inexact = 0
    for _ in range(20):
        p = prop.propose(attempts, seen)
        inexact += bool(fam.inexact_knobs(p.genome, geos[0]))
        attempts.append(
            Attempt(
                len(attempts),
                "t",
                fam.name,
                dict(p.genome),
                p.genome.key,
                p.origin,
                verdict=Verdict.rejected("perf", "x"),
                score=_landscape(p.genome),
            )
        )
        seen.add(p.genome.key)
    assert inexact > 0


def test_identical_machine_code_is_screened_out():
    """With static_key set, a genome whose digest equals a measured genome's is never proposed."""

    def digest(g):
        return f"vec{g['vec']}-unroll{g['unroll']}" if g["warp0_stream"] else Genome(g).key

    prop = Surrogate(FAM, GEOS, {}, 5)
    prop.static_key = digest
    attempts, proposals, _ = drive(prop, FAM, 60, 5, _judge)
    measured: set[str] = {digest(Genome(attempts[0].genome))}
    for a in attempts[1:]:
        d = digest(Genome(a.genome))
        assert d not in measured, f"{a.genome_key} has the machine code of a measured genome"
        measured.add(d)


def test_tiny_space_is_enumerated_then_exhausted():
    for forbid in (None, (2, "y")):
        fam = _tiny(forbid)
        prop = Surrogate(fam, TINY_GEO, {}, 0)
        attempts, _, stopped = drive(prop, fam, 10, 0)
        assert stopped
        space = {Genome({"a": a, "b": b}).key for a in (1, 2) for b in ("x", "y") if (a, b) != forbid}
        assert {a.genome_key for a in attempts} == space and len(attempts) == len(space)
        assert prop.propose(attempts, {a.genome_key for a in attempts}) is None


def test_bool_and_int_values_stay_apart():
    fam = _tiny()
    fam = dataclasses.replace(fam, knobs=(Knob("a", (0, 1, True), 0), Knob("b", ("x", "y"), "x")))
    prop = Surrogate(fam, TINY_GEO, {}, 0)
    attempts, _, stopped = drive(prop, fam, 10, 0)
    assert stopped and len({a.genome_key for a in attempts}) == 6


@dataclass
class Big(Family):
    """12 knobs x 4 values: 16.7 million genomes, too many to score whole (the offspring pool is used)."""

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        return "k0 = k1 = 3 is not allowed" if genome["k0"] == genome["k1"] == 3 else None

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return []

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        return {}

    def reference(self, inputs, geometry, dtype=None) -> dict[str, Any]:
        return {}

    def launch(self, genome, geometry) -> Launch:
        return Launch((1, 1, 1), (32, 1, 1))

    def kernel_args(self, inputs, outputs, geometry) -> list[Any]:
        return []


def test_big_space_uses_a_pool_and_still_improves():
    fam = Big(name="big", knobs=tuple(Knob(f"k{i}", (0, 1, 2, 3), 0) for i in range(12)))
    weights = [0.3, -0.2, 0.25, 0.1, 0.0, 0.05, -0.1, 0.15, 0.0, 0.2, -0.05, 0.1]

    def judge(g, rng):
        return None, 2.718281828 ** sum(w * g[f"k{i}"] / 3 for i, w in enumerate(weights))

    prop = Surrogate(fam, TINY_GEO, {"pool": 512}, 0)
    attempts, proposals, stopped = drive(prop, fam, 40, 0, judge)
    assert not stopped and len({a.genome_key for a in attempts}) == len(attempts)
    assert all(fam.check(p.genome, TINY_GEO) is None for p in proposals)
    assert max(a.score for a in attempts) > 1.8  # the baseline is 1.0; the best is about 3.5


@pytest.mark.parametrize(
    "options, bad",
    [
        ({"pairwise": -1}, "pairwise"),
        ({"pairwise": 5}, "pairwise"),
        ({"ordinal": "x"}, "ordinal"),
        ({"effect": 0}, "effect"),
        ({"noise": 2}, "noise"),
        ({"init": 1.5}, "init"),
        ({"init": 65}, "init"),
        ({"pool": 10}, "pool"),
        ({"calibrate": "yes"}, "calibrate"),
        ({"fit": 1}, "fit"),
        ({"fit_draw": "no"}, "fit_draw"),
        ({"fit": False, "fit_ordinal": True}, "fit_ordinal"),  # combinations that would not do what they say
        ({"fit": False, "fit_draw": True}, "fit_draw"),
        ({"ordinal": 0, "fit_ordinal": True}, "fit_ordinal"),
    ],
)
def test_validate_options(options, bad):
    with pytest.raises(ValueError, match=rf"^{bad}: "):
        Surrogate.validate_options(options)
    Surrogate.validate_options(
        {"effect": 0.15, "pairwise": 0.5, "ordinal": 0.0, "noise": 0.02, "init": 4, "pool": 4096, "calibrate": False}
    )


def test_registered_with_its_options_table():
    from evo.config import schema_markdown

    assert PROPOSERS["surrogate"] is Surrogate
    docs = schema_markdown()  # docs/config.md: the table is written from OPTIONS, with each default
    for name, opt in Surrogate.OPTIONS.items():
        assert f"| `{name}` | {opt.type_text} | {opt.allowed_text} | {opt.default_text} |" in docs, name


def test_beats_random_search_on_the_recorded_sweep():
    """Evaluations to come within 1% of the sweep's best (tools/search_bench.py), 4 seeds each."""
    from tools import search_bench as sb

    space = sb.load_space("mhc_pre_big_fuse")
    sur = [sb.run_proposer(space, "surrogate", s).evals or space.size for s in range(4)]
    rnd = [sb.run_proposer(space, "random", s).evals or space.size for s in range(4)]
    assert statistics.median(sur) * 4 <= statistics.median(rnd), (sur, rnd)
    assert max(sur) <= 60, sur


def test_calibration_finds_a_sharp_optimum():
    """mhc_prenorm_gemm's best genome sits on an interaction of four knobs: the fixed prior predicted it at 32x with
    +/- 4% after 100 attempts (it measures 46.7x) and needed 445 evaluations to come within 1% of it on seed 103
    (one of the tuning seeds 100..119); with the fitted overall scale it needs 54 (docs/search-efficiency.md)."""
    from tools import search_bench as sb

    space = sb.load_space("mhc_prenorm_gemm")
    fixed_prior = {"fit": False, "ordinal": 0.5}  # the prior this test was written for (before `fit`)
    # the proposer seeded with 103 itself (the bench's factory seeds per session: seed * 7919 + 1)
    # the portfolio off: this is calibrate's test (the default portfolio's cost here is the next test's)
    fixed_prior = {**fixed_prior, "portfolio": 0}
    calibrated = sb.run_proposer(
        space, Surrogate(space.family, space.geometries, {**fixed_prior, "calibrate": True}, 103), 103
    )
    fixed = sb.run_proposer(
        space, Surrogate(space.family, space.geometries, {**fixed_prior, "calibrate": False}, 103), 103
    )
    assert calibrated.ok and calibrated.evals <= 80, calibrated.evals
    assert not fixed.ok or fixed.evals > 300, fixed.evals  # what the option is for


def test_the_default_portfolio_does_not_keep_failing_on_a_sharp_optimum():
    """The same run with the default portfolio (TPE's every third proposal from the 30th): TPE left failed genomes
    out of its model, so 33 of its 47 turns failed (``math`` mma with a small ``split_k`` does not run) and the run
    needed 169 evaluations; told failures as the worst speed it needs 90 (54 without the portfolio: TPE's measured
    genomes draw the model into the ``fma`` basin for a while, evo/search/portfolio_tpe.py)."""
    from tools import search_bench as sb

    space = sb.load_space("mhc_prenorm_gemm")
    opts = {"fit": False, "ordinal": 0.5, "calibrate": True}
    run = sb.run_proposer(space, Surrogate(space.family, space.geometries, opts, 103), 103)
    assert run.ok and run.evals <= 100, run.evals


def _measured(space, n: int, seed: int):
    """n measured genomes of the space (value-index rows) and a seeded generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sur = Surrogate(space.family, space.geometries, {"fit": True}, seed)
    picks = rng.choice(len(space.genomes), n, replace=False)
    return sur, np.array([sur.code(space.genomes[i]) for i in picks]), rng


def test_fit_sizes_the_prior_by_the_attempts():
    """`fit` picks the prior sizes by marginal likelihood: one-knob effects of ~60% give a much larger effect size
    than ones of ~3%, and a landscape made of two-knob interactions a larger pairwise share than one made of one-knob
    effects alone."""
    import numpy as np

    from tools import search_bench as sb

    space = sb.load_space("mhc_pre_big_fuse")
    sizes = {}
    for label, scale in (("large", 0.6), ("small", 0.03)):
        sur, codes, rng = _measured(space, 40, 1)
        effects = [rng.normal(0, scale, n) for n in sur.levels]
        y = np.array([sum(e[c[i]] for i, e in enumerate(effects)) for c in codes])
        sur._fit(codes, y)
        sizes[label] = (sur.w_main, sur.w_pair / sur.w_main)
    assert sizes["large"][0] >= 16 * sizes["small"][0], sizes  # (20x the scale: 400x the variance)
    sur, codes, rng = _measured(space, 60, 2)
    pair = {(i, j): rng.normal(0, 0.3, (sur.levels[i], sur.levels[j])) for i in sur.active for j in sur.active if i < j}
    y = np.array([sum(t[c[i], c[j]] for (i, j), t in pair.items()) for c in codes])
    sur._fit(codes, y)
    assert sur.w_pair / sur.w_main > sizes["large"][1], (sur.w_pair / sur.w_main, sizes)


def test_fit_takes_the_high_order_term_only_where_the_scores_need_it():
    """With `local` set, `fit` chooses its size among none, half and all: none on one-knob effects, some on a
    landscape where speed follows closeness to one genome in every knob at once (no sum of one- and two-knob
    terms); the prior covariance of two genomes then falls by half per knob they differ in."""
    import numpy as np

    from tools import search_bench as sb

    space = sb.load_space("mhc_pre_big_fuse")
    sur, codes, rng = _measured(space, 60, 3)
    sur = Surrogate(space.family, space.geometries, {"fit": True, "local": 1.0}, 3)
    effects = [rng.normal(0, 0.3, n) for n in sur.levels]
    sur._fit(codes, np.array([sum(e[c[i]] for i, e in enumerate(effects)) for c in codes]))
    assert sur.w_local == 0.0
    centre = codes[0]
    y = np.array([0.6 * 0.5 ** float((c != centre)[sur.active].sum()) for c in codes])
    sur._fit(codes, y)
    assert sur.w_local > 0.0
    a, b = codes[:1].copy(), codes[:1].copy()
    i = sur.active[0]
    b[0, i] = (b[0, i] + 1) % sur.levels[i]
    base = Surrogate(space.family, space.geometries, {"fit": False}, 3)
    base.w_main, base.w_pair, base.w_trend = sur.w_main, sur.w_pair, sur.w_trend
    gap = sur.kernel(a, b)[0, 0] - base.kernel(a, b)[0, 0]
    assert np.isclose(gap, 0.5 * sur.w_local)  # one knob apart
    assert np.isclose(sur.kernel(a, a)[0, 0] - base.kernel(a, a)[0, 0], sur.w_local)
    # the predictive variance reads the prior's diagonal apart: it must be the kernel's, every term included
    assert np.allclose(sur.prior_var(codes), np.diag(sur.kernel(codes, codes)))
    assert np.allclose(base.prior_var(codes), np.diag(base.kernel(codes, codes)))


def test_fit_ordinal_sizes_the_trend_by_the_attempts():
    """With `fit_ordinal`, `fit` also chooses the trend's size: the largest of FIT_ORDINAL where speed climbs along
    the numeric knobs' ordered values, the smallest where one-knob effects are the same at both ends of the order;
    without it, the configured `ordinal` holds."""
    import numpy as np

    from tools import search_bench as sb

    space = sb.load_space("mhc_pre_big_fuse")
    _, codes, rng = _measured(space, 40, 5)
    probe = Surrogate(space.family, space.geometries, {}, 5)
    assert probe.rank, "the test needs numeric knobs"
    trend = np.array([sum(0.3 * r[c[i]] for i, r in probe.rank.items()) for c in codes])
    # symmetric in the ordered values (the same at both ends): no part of it lies along a centred rank
    half = [rng.normal(0, 0.3, (n + 1) // 2) for n in probe.levels]
    effects = [np.array([h[min(k, n - 1 - k)] for k in range(n)]) for h, n in zip(half, probe.levels)]
    unordered = np.array([sum(e[c[i]] for i, e in enumerate(effects)) for c in codes])
    ratio = {}
    for label, y in (("trend", trend), ("unordered", unordered)):
        sur = Surrogate(space.family, space.geometries, {"fit": True, "fit_ordinal": True}, 5)
        sur._fit(codes, y)
        ratio[label] = sur.w_trend / sur.w_main
        fixed = Surrogate(space.family, space.geometries, {"fit": True, "ordinal": 1.0}, 5)
        fixed._fit(codes, y)
        assert np.isclose(fixed.w_trend, fixed.w_main)
    assert np.isclose(ratio["trend"], max(Surrogate.FIT_ORDINAL) ** 2), ratio
    assert np.isclose(ratio["unordered"], min(Surrogate.FIT_ORDINAL) ** 2), ratio


def test_fit_draw_draws_the_prior_sizes_by_seed():
    """With few measurements several grid points are about as likely: fit_draw picks among them by the seed, fit
    alone always the most likely one."""
    import numpy as np

    from tools import search_bench as sb

    space = sb.load_space("mhc_pre_big_fuse")
    _, codes, rng = _measured(space, 6, 4)
    y = rng.normal(0, 0.2, len(codes))
    drawn, best = set(), set()
    for seed in range(12):
        for opts, into in (({"fit": True, "fit_draw": True}, drawn), ({"fit": True}, best)):
            sur = Surrogate(space.family, space.geometries, opts, seed)
            sur._fit(codes, y)
            into.add((sur.w_main, sur.w_pair))
    assert len(best) == 1 and len(drawn) >= 3, (best, drawn)
    assert np.isfinite(list(best)[0]).all()


def test_each_proposal_fits_the_prior_to_the_campaigns_attempts():
    """Through the campaign loop: on mhc_prenorm_gemm (knobs that move speed 40x) the fitted effect size grows well
    past the configured 0.15; with fit off it stays 0.15."""
    from tools import search_bench as sb

    space = sb.load_space("mhc_prenorm_gemm")
    sizes = {}
    for fit in (True, False):
        # ordinal 1.0: the trend (2.0 by default) takes a share of the spread on this run's first attempts
        sur = Surrogate(space.family, space.geometries, {"fit": fit, "effect": 0.15, "ordinal": 1.0}, 0)
        sb.bench_campaign(space, sur, 12, until_target=False).run()
        sizes[fit] = sur.w_main
    assert sizes[False] == pytest.approx(0.15**2)
    assert sizes[True] >= 0.25**2, sizes


def test_the_configs_correctness_mode_is_known_from_the_first_proposal():
    """Told exact mode, no genome with an inexact knob is proposed, before any rejection shows the mode; told
    tolerance mode, such genomes are not discounted (INEXACT_PRIOR) while none was measured yet. On a flat
    landscape the discount alone decides: unknown mode proposes none of them in 12, tolerance mode does."""
    geos = [Geometry("T4096_H4096", {"T": 4096, "H": 4096, "S": 1, "prenorm": True}, 1.0)]  # block, vec inexact

    def inexact_proposed(mode):
        prop = Surrogate(FAM, geos, {}, 0)
        prop.correctness_mode = mode
        base = _baseline_attempt(FAM)
        attempts, seen, n = [base], {base.genome_key}, 0
        for _ in range(12):
            p = prop.propose(attempts, seen)
            n += bool(FAM.inexact_knobs(p.genome, geos[0]))
            attempts.append(Attempt(len(attempts), "t", FAM.name, dict(p.genome), p.genome.key, p.origin, score=1.0))
            seen.add(p.genome.key)
        return n

    assert inexact_proposed(None) == 0
    assert inexact_proposed("exact") == 0
    assert inexact_proposed("tolerance") > 6


@pytest.mark.parametrize("pool", [False, True])
def test_screen_measures_every_one_knob_change_of_the_baseline_first(pool):
    """screen: the proposals after the baseline are its one-knob changes, each once, until none is left; then the
    model leads (also where the space is too big to enumerate: the neighbours are made, not drawn from the pool)."""
    if pool:
        fam: Family = Big(name="big", knobs=tuple(Knob(f"k{i}", (0, 1, 2, 3), 0) for i in range(10)))
        geos = TINY_GEO
    else:
        fam, geos = FAM, GEOS
    base = fam.baseline()
    near = set()
    for k in fam.knobs:
        for v in k.values:
            g = base.replace(**{k.name: v})
            if v != base[k.name] and fam.check(g, geos) is None:
                near.add(g.key)
    prop = Surrogate(fam, geos, {"screen": True}, 0)
    attempts, proposals, _ = drive(prop, fam, len(near) + 5, 0)
    first = [p.genome.key for p in proposals[: len(near)]]
    assert set(first) == near and len(first) == len(near)
    assert all(p.origin.startswith("surrogate screen") for p in proposals[: len(near)])
    assert not any(p.origin.startswith("surrogate screen") for p in proposals[len(near) :])
    plain = drive(Surrogate(fam, geos, {}, 0), fam, len(near), 0)[1]
    assert {p.genome.key for p in plain} != near  # without it the model does not walk the neighbours alone
