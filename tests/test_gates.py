"""The gates as pure functions: order-statistic intervals, perf, correctness and static verdicts."""

from __future__ import annotations

import math
import random

import pytest

from evo.core.records import Code, Resources
from gates import (
    CorrectnessEvidence,
    OutputCheck,
    PairSamples,
    correctness_gate,
    identical_sass,
    noise_floor,
    perf_gate,
    static_gate,
    threshold,
)
from gates.stats import median, median_interval

# ---------------------------------------------------------------------------
# gates.stats.median_interval


@pytest.mark.parametrize(
    "n, lo_rank, coverage",
    [
        (6, 1, 1 - 2 * 1 / 64),  # too few for more than the full range
        (10, 2, 1 - 2 * 11 / 1024),  # [x(2), x(9)]: 97.85%
        (12, 3, 1 - 2 * (1 + 12 + 66) / 4096),  # [x(3), x(10)]: 96.14% (the textbook pair)
    ],
)
def test_median_interval_ranks_and_coverage(n, lo_rank, coverage):
    rng = random.Random(n)
    xs = [rng.uniform(0.9, 1.1) for _ in range(n)]
    s = sorted(xs)
    iv = median_interval(xs, 0.95)
    assert iv.n == n
    assert iv.lo == s[lo_rank - 1]
    assert iv.hi == s[n - lo_rank]
    assert iv.confidence == pytest.approx(coverage, abs=1e-4)
    assert iv.confidence >= 0.95
    assert iv.value == median(xs)
    assert iv.lo <= iv.value <= iv.hi


def test_median_interval_one_rank_narrower_would_miss_the_confidence():
    # The rank chosen is the largest that still covers: one rank further in drops below 95%.
    for n in (10, 12, 20, 40, 100):
        xs = list(range(n))
        iv = median_interval(xs, 0.95)
        assert iv.confidence >= 0.95, n
        r = iv.lo + 1  # xs[i] == i, so the one-based rank is lo + 1
        tail_next = sum(math.comb(n, i) for i in range(r + 1)) / 2**n
        assert 1 - 2 * tail_next < 0.95, n


def test_median_interval_says_when_too_few_samples():
    iv = median_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.95)
    assert (iv.lo, iv.hi) == (1.0, 5.0)
    assert iv.confidence < 0.95  # 1 - 2/32: reported, not hidden


def test_median_interval_contains_median_and_is_monotone_in_confidence():
    rng = random.Random(7)
    for n in (6, 9, 12, 25, 60):
        xs = [rng.lognormvariate(0, 0.02) for _ in range(n)]
        prev = None
        for conf in (0.5, 0.8, 0.9, 0.95, 0.99):
            iv = median_interval(xs, conf)
            assert iv.lo <= median(xs) <= iv.hi
            if prev is not None:
                assert iv.lo <= prev.lo and iv.hi >= prev.hi, (n, conf)
            prev = iv


def test_median_interval_of_nothing_raises():
    with pytest.raises(ValueError):
        median_interval([])


# ---------------------------------------------------------------------------
# perf gate


def _series(center: float, n: int = 12, noise: float = 0.001, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.gauss(0, noise)) for _ in range(n)]


def _pair(
    name: str,
    speedup: float,
    weight: float = 1.0,
    parent_us: float = 100.0,
    seed: int = 0,
    noise: float = 0.001,
    bytes_moved: int = 0,
) -> PairSamples:
    parent = _series(parent_us, noise=noise, seed=seed)
    cand = _series(parent_us / speedup, noise=noise, seed=seed + 1000)
    return PairSamples(name, weight, cand, parent, None, 0, bytes_moved, "test")


def test_threshold_is_max_of_min_gain_and_three_floors():
    assert threshold(0.01, 0.001) == pytest.approx(1.01)
    assert threshold(0.01, 0.01) == pytest.approx(1.03)
    assert threshold(0.0, 0.002) == pytest.approx(1.006)


def test_clear_win_accepted_with_intervals_and_score():
    res = perf_gate([_pair("A", 1.25)], floor=0.001, min_gain=0.01)
    assert res.verdict.status == "accepted", res.verdict.reason
    assert res.verdict.gate == "perf"
    iv = res.vs_parent["A"]
    assert 1.22 < iv.lo <= iv.value <= iv.hi < 1.28
    assert res.vs_baseline["A"] == iv  # no base series: the champion is the baseline
    assert res.score == pytest.approx(iv.value)
    assert res.timings["A"].samples == 12
    assert res.timings["A"].median_us == pytest.approx(80.0, rel=0.01)


def _exact(name: str, speedups: list[float], weight: float = 1.0) -> PairSamples:
    return PairSamples(name, weight, [100.0 / r for r in speedups], [100.0] * len(speedups))


def test_judged_on_the_lower_bound_not_the_median():
    # Median speedup 1.02 clears 1.01, but the 95% interval [x(3), x(10)] starts at 1.00.
    wide = [0.98, 0.99, 1.00, 1.01, 1.02, 1.02, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07]
    res = perf_gate([_exact("A", wide)], floor=0.001, min_gain=0.01)
    assert res.vs_parent["A"].value == pytest.approx(1.02)
    assert res.vs_parent["A"].lo == pytest.approx(1.00)
    assert res.verdict.status == "rejected" and "lower bound under 1.0100" in res.verdict.reason
    res = perf_gate([_exact("A", wide), _exact("B", wide)], floor=0.001, min_gain=0.01, rule="weighted")
    assert res.verdict.status == "rejected"
    tight = [1.012, 1.013, 1.014, 1.015, 1.02, 1.02, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07]
    assert perf_gate([_exact("A", tight)], floor=0.001, min_gain=0.01).verdict.status == "accepted"


def test_no_gain_rejected():
    res = perf_gate([_pair("A", 1.0)], floor=0.001, min_gain=0.01)
    assert res.verdict.status == "rejected" and res.verdict.gate == "perf"
    assert "not faster at A" in res.verdict.reason


def test_too_few_pairs_rejected():
    s = _pair("A", 1.5)
    s.cand_us, s.parent_us, s.discarded = s.cand_us[:2], s.parent_us[:2], 10
    res = perf_gate([s], floor=0.001)
    assert res.verdict.status == "rejected" and "only 2 unthrottled pairs" in res.verdict.reason


def test_rule_every_needs_each_weighted_geometry():
    samples = [_pair("A", 1.20, seed=1), _pair("B", 1.00, seed=2)]
    res = perf_gate(samples, floor=0.001, min_gain=0.01, rule="every")
    assert res.verdict.status == "rejected"
    assert "not faster at B" in res.verdict.reason


def test_rule_weighted_lets_a_weighted_geometry_give_back_against_the_champion_not_the_baseline():
    """The H200 campaign of 2026-12-02: from a champion at (47.9, 71.4) µs, (42.6, 72.4) is 1.12x and 0.986x, a
    1.05x weighted mean; under rule weighted that is the objective's win, never below the baseline."""

    def pair(name, speedup, vs_base, seed):
        s = _pair(name, speedup, seed=seed)
        s.base_us = [c * vs_base for c in s.cand_us]
        return s

    res = perf_gate([pair("A", 1.12, 1.8, 1), pair("B", 0.986, 1.5, 2)], floor=0.001, min_gain=0.01, rule="weighted")
    assert res.verdict.status == "accepted", res.verdict.reason
    res = perf_gate([pair("A", 1.12, 1.8, 1), pair("B", 0.986, 0.97, 2)], floor=0.001, min_gain=0.01, rule="weighted")
    assert res.verdict.code is Code.PERF_SLOWER and "slower than the baseline at B" in res.verdict.reason
    # rule every: the same step is refused (each weighted geometry must win against the champion)
    res = perf_gate([pair("A", 1.12, 1.8, 1), pair("B", 0.986, 1.5, 2)], floor=0.001, min_gain=0.01, rule="every")
    assert res.verdict.status == "rejected" and "at B" in res.verdict.reason


def test_rule_weighted_judges_the_weighted_geomean():
    # A 5% faster, B unchanged: equal weights -> geomean ~1.025 > 1.01 accepted.
    res = perf_gate(
        [_pair("A", 1.05, 1.0, seed=1), _pair("B", 1.0, 1.0, seed=2)], floor=0.001, min_gain=0.01, rule="weighted"
    )
    assert res.verdict.status == "accepted", res.verdict.reason
    assert "weighted 1.02" in res.verdict.reason
    # Same timings, B weighted 9x: geomean ~1.005 < 1.01 rejected. The weights are used.
    res = perf_gate(
        [_pair("A", 1.05, 1.0, seed=1), _pair("B", 1.0, 9.0, seed=2)], floor=0.001, min_gain=0.01, rule="weighted"
    )
    assert res.verdict.status == "rejected"
    assert "weighted speedup" in res.verdict.reason
    # And under "every" the equal-weight case is still a rejection.
    res = perf_gate([_pair("A", 1.05, 1.0, seed=1), _pair("B", 1.0, 1.0, seed=2)], floor=0.001, rule="every")
    assert res.verdict.status == "rejected"


def test_score_is_weighted_geomean_over_weighted_geometries_only():
    res = perf_gate(
        [_pair("A", 1.2, 1.0, seed=1), _pair("B", 1.1, 3.0, seed=2), _pair("W", 1.0, 0.0, seed=3)], floor=0.001
    )
    va, vb = res.vs_baseline["A"].value, res.vs_baseline["B"].value
    assert res.score == pytest.approx(math.exp((math.log(va) + 3 * math.log(vb)) / 4))


def test_watched_geometry_regression_rejects():
    floor = 0.001
    # W (weight 0) 5% slower: far beyond 3 x floor.
    res = perf_gate([_pair("A", 1.2, seed=1), _pair("W", 0.95, 0.0, seed=2)], floor=floor)
    assert res.verdict.status == "rejected"
    # (here the champion is the baseline: the default guard, against the baseline, and the champion guard agree)
    assert "slower than the baseline at W" in res.verdict.reason
    res = perf_gate([_pair("A", 1.2, seed=1), _pair("W", 0.95, 0.0, seed=2)], floor=floor, watched="champion")
    assert res.verdict.status == "rejected" and "slower at W" in res.verdict.reason
    # W within the noise band (0.1% slower, band 0.3%): the win at A stands.
    res = perf_gate([_pair("A", 1.2, seed=1), _pair("W", 0.999, 0.0, seed=2, noise=0.0002)], floor=floor)
    assert res.verdict.status == "accepted", res.verdict.reason


def test_watched_slack_trades_a_little_of_a_watched_geometry_never_below_the_baseline():
    floor = 0.0001  # the noise band (0.03%) alone rejects a watched geometry 1.2% slower
    win, w = _pair("A", 1.2, seed=1), _pair("W", 0.988, 0.0, seed=2, noise=0.0002)
    w.base_us = [c * 1.1 for c in w.cand_us]  # the champion is not the baseline; W still 1.1x the baseline
    res = perf_gate([win, w], floor=floor, watched="champion")
    assert res.verdict.status == "rejected" and "noise band" in res.verdict.reason
    res = perf_gate([win, w], floor=floor, watched_slack=0.02, watched="champion")
    assert res.verdict.status == "accepted", res.verdict.reason
    # beyond the slack: rejected, and the reason names it
    far = _pair("W", 0.97, 0.0, seed=2, noise=0.0002)
    far.base_us = [c * 1.1 for c in far.cand_us]
    res = perf_gate([win, far], floor=floor, watched_slack=0.02, watched="champion")
    assert res.verdict.status == "rejected" and "beyond the watched slack of 2.00%" in res.verdict.reason
    # within the slack against the champion but slower than the baseline (here the champion is the baseline): rejected
    res = perf_gate(
        [win, _pair("W", 0.988, 0.0, seed=2, noise=0.0002)], floor=floor, watched_slack=0.02, watched="champion"
    )
    assert res.verdict.status == "rejected" and "slower than the baseline at W" in res.verdict.reason
    w_base = _pair("W", 0.988, 0.0, seed=2, noise=0.0002)
    w_base.base_us = [c * 0.995 for c in w_base.cand_us]  # the baseline 0.5% faster than the candidate there
    res = perf_gate([win, w_base], floor=floor, watched_slack=0.02, watched="champion")
    assert res.verdict.status == "rejected" and "slower than the baseline at W" in res.verdict.reason
    # a weighted geometry gets no slack
    res = perf_gate(
        [win, _pair("B", 0.988, 1.0, seed=3, noise=0.0002)], floor=floor, watched_slack=0.02, watched="champion"
    )
    assert res.verdict.status == "rejected" and "noise band" in res.verdict.reason


def test_physics_check_rejects_beyond_copy_ceiling():
    # 4e9 bytes at 4 TB/s: 1000 µs is 100% of the ceiling.
    too_fast = _pair("A", 1100 / 900, parent_us=1100.0, bytes_moved=4_000_000_000)  # ~111%
    res = perf_gate([too_fast], floor=0.001, ceiling_tbps=4.0)
    assert res.verdict.status == "rejected"
    assert "physics" in res.verdict.reason
    assert res.roofline_pct["A"] == pytest.approx(100 * 1000 / 900, rel=0.01)
    assert res.score is None
    plausible = _pair("A", 1100 / 960, parent_us=1100.0, bytes_moved=4_000_000_000)  # ~104%: within the slack
    res = perf_gate([plausible], floor=0.001, ceiling_tbps=4.0)
    assert res.verdict.status == "accepted", res.verdict.reason


def test_threshold_applied_by_the_gate():
    s = [_pair("A", 1.02, noise=0.0005)]
    assert perf_gate(s, floor=0.001, min_gain=0.01).verdict.status == "accepted"
    r = perf_gate(s, floor=0.01, min_gain=0.01)  # 3 x floor = 3% > min_gain
    assert r.verdict.status == "rejected" and "1.0300" in r.verdict.reason
    r = perf_gate(s, floor=0.001, min_gain=0.05)
    assert r.verdict.status == "rejected" and "1.0500" in r.verdict.reason


def test_aa_samples_never_accepted():
    """Identical distributions with rare outliers: 200 full decisions, none accepted."""
    rng = random.Random(12345)

    def draw(n):
        out = []
        for _ in range(n):
            x = 50.0 * rng.lognormvariate(0, 0.004)
            if rng.random() < 0.05:
                x *= 1 + rng.choice([-1, 1]) * rng.uniform(0.01, 0.04)  # the occasional hiccup
            out.append(x)
        return out

    accepted = 0
    los = []
    for _ in range(200):
        a, b = draw(40), draw(40)
        floor = noise_floor([x / y for x, y in zip(a, b)])
        samples = [PairSamples(g, w, draw(12), draw(12)) for g, w in (("A", 1.0), ("B", 1.0), ("W", 0.0))]
        res = perf_gate(samples, floor, min_gain=0.01)
        accepted += res.verdict.status == "accepted"
        los.append(min(iv.lo for iv in res.vs_parent.values()))
    assert accepted == 0
    assert max(los) < 1.01


def test_noise_floor():
    assert noise_floor([1.0] * 40) == pytest.approx(0.0, abs=1e-12)
    xs = [100.0 + 0.01 * i for i in range(40)]
    assert noise_floor([x / x for x in xs]) == pytest.approx(0.0, abs=1e-12)
    rng = random.Random(3)
    noisy = [rng.lognormvariate(0, 0.01) for _ in range(40)]
    f = noise_floor(noisy)
    assert 0.0005 < f < 0.02
    # A constant offset is part of the floor (it is how far the interval reaches from 1).
    assert noise_floor([1.01] * 20) == pytest.approx(0.01)


# ---------------------------------------------------------------------------
# correctness gate

H = {f"g/{s}/{o}": f"h-{s}-{o}" for s in range(3) for o in ("x", "y")}
ERR = {k: 1e-3 for k in H}


def _ev(**overrides) -> CorrectnessEvidence:
    """Evidence equal to the baseline; overrides: (seed, output) -> OutputCheck fields."""
    checks = []
    for s in range(3):
        for o in ("x", "y"):
            c = OutputCheck("g", s, o, [H[f"g/{s}/{o}"]] * 2, rel_err=1e-3)
            for k, v in overrides.get(f"{s}{o}", {}).items():
                setattr(c, k, v)
            checks.append(c)
    return CorrectnessEvidence(checks)


def test_exact_pass():
    v = correctness_gate(_ev(), H, "exact")
    assert v.ok and v.status == "pass"


def test_exact_mismatch_names_geometry_seed_output_and_detail():
    v = correctness_gate(
        _ev(**{"2y": {"hashes": ["other", "other"], "mismatch": "first diff at [3, 1]: 0.5 vs 0.25"}}), H, "exact"
    )
    assert v.status == "rejected" and v.gate == "correctness"
    assert "y at g seed 2" in v.reason
    assert "first diff at [3, 1]: 0.5 vs 0.25" in v.reason


def test_race_between_runs():
    v = correctness_gate(_ev(**{"1x": {"hashes": [H["g/1/x"], "moved"]}}), H, "exact")
    assert v.status == "rejected" and "race" in v.reason and "x at g seed 1" in v.reason
    # Also in tolerance mode: a race is never tolerated.
    v = correctness_gate(_ev(**{"1x": {"hashes": [H["g/1/x"], "moved"]}}), H, "tolerance", None, ERR)
    assert v.status == "rejected" and "race" in v.reason


def test_nan_rejected():
    v = correctness_gate(_ev(**{"0x": {"nonfinite": 7}}), H, "tolerance", None, ERR)
    assert v.status == "rejected" and "7 NaN/Inf" in v.reason and "x at g seed 0" in v.reason


def test_unwritten_rejected():
    v = correctness_gate(_ev(**{"2x": {"unwritten": 16}}), H, "exact")
    assert v.status == "rejected" and "16 elements" in v.reason and "never written" in v.reason


def test_inexact_knob_in_exact_mode_rejected_naming_it():
    v = correctness_gate(_ev(), H, "exact", {"g": [], "g32": ["split_reduce"]})
    assert v.status == "rejected" and v.gate == "correctness"
    assert "split_reduce" in v.reason and "g32" in v.reason and "exact mode" in v.reason
    # No inexact knob anywhere: fine.
    assert correctness_gate(_ev(), H, "exact", {"g": [], "g32": []}).ok


def test_missing_baseline_hash_is_an_error():
    h = dict(H)
    del h["g/1/y"]
    v = correctness_gate(_ev(), h, "exact")
    assert v.status == "error" and v.kind == "not_recorded"


def test_tolerance_mode_within_and_beyond_factor():
    diff = {"hashes": ["d", "d"]}
    inexact = {"g": ["split_reduce"]}  # allowed in tolerance mode
    ok = correctness_gate(_ev(**{"1y": {**diff, "rel_err": 1.9e-3}}), H, "tolerance", inexact, ERR, 2.0)
    assert ok.ok, ok.reason
    bad = correctness_gate(_ev(**{"1y": {**diff, "rel_err": 2.1e-3}}), H, "tolerance", inexact, ERR, 2.0)
    assert bad.status == "rejected" and "y at g seed 1" in bad.reason and "2x" in bad.reason
    # A larger factor lets the same evidence through.
    assert correctness_gate(_ev(**{"1y": {**diff, "rel_err": 2.1e-3}}), H, "tolerance", inexact, ERR, 3.0).ok
    # The same differing hash in exact mode is a rejection whatever the error.
    assert not correctness_gate(_ev(**{"1y": {**diff, "rel_err": 1e-9}}), H, "exact").ok
    # A differing hash with no float64 error to judge by is not passed.
    v = correctness_gate(_ev(**{"1y": {**diff, "rel_err": None}}), H, "tolerance", inexact, ERR)
    assert v.status == "rejected"


# ---------------------------------------------------------------------------
# static gate

BASE = {"S=1": Resources(registers=40, stack_frame=96), "S=32": Resources(registers=48, stack_frame=96)}


def test_static_pass_and_smaller_frame_pass():
    assert static_gate(BASE, BASE).ok
    assert static_gate({k: Resources(registers=32, stack_frame=0) for k in BASE}, BASE).ok


def test_static_register_limit():
    r = {"S=1": Resources(registers=200), "S=32": Resources(registers=48, stack_frame=96)}
    assert static_gate(r, BASE, max_registers=255).ok
    v = static_gate(r, BASE, max_registers=128)
    assert v.status == "rejected" and v.gate == "static" and "200 registers > limit 128" in v.reason
    assert "(S=1)" in v.reason


def test_static_new_spills():
    r = {**BASE, "S=32": Resources(registers=48, stack_frame=96, spill_stores=8, spill_loads=8)}
    v = static_gate(r, BASE)
    assert v.status == "rejected" and "spills" in v.reason and "(S=32)" in v.reason
    # The baseline's own spills are not new.
    spilled = {k: Resources(registers=40, stack_frame=96, spill_stores=8, spill_loads=8) for k in BASE}
    assert static_gate(spilled, spilled).ok
    # allow_new_spills lets them through when the frame does not grow.
    assert static_gate(r, BASE, allow_new_spills=True).ok


def test_static_larger_stack_frame():
    base = {"S=1": Resources(registers=32, stack_frame=0)}
    v = static_gate({"S=1": Resources(registers=32, stack_frame=96)}, base)
    assert v.status == "rejected" and "96-byte stack frame" in v.reason and "baseline has 0" in v.reason


def test_identical_sass():
    v = identical_sass("abc", {"abc": 7, "def": 3})
    assert v.status == "rejected" and v.gate == "static" and "#7" in v.reason
    assert identical_sass("xyz", {"abc": 7}).ok


def test_early_stop_under_rule_weighted_judges_the_mean_of_each_round():
    from gates.perf import EarlyStop

    slower_here = {"cand": [101.0] * 6, "champ": [100.0] * 6}  # 0.99x at this geometry in every pair
    plain = EarlyStop(6)
    assert plain.hit(slower_here)  # rule every: slower in every pair here is enough
    faster_before = plain.with_prior([([1.12] * 12, 1.0)], 1.0)  # 1.12x at the weighted geometry measured before
    assert not faster_before.hit(slower_here)  # the mean of each round is ~1.05: not a loser
    slower_before = plain.with_prior([([0.98] * 12, 1.0)], 1.0)
    assert slower_before.hit(slower_here)
    assert not faster_before.hit({"cand": [101.0] * 5, "champ": [100.0] * 5})  # only after `after` rounds


def test_a_step_that_wins_the_mean_is_not_stopped_early_at_the_geometry_it_gives_back(tmp_path):
    """The H200 campaign of 2026-12-02 under rule weighted: from champion #8 (h_split 2), #12 (h_split 1) was
    1.13x at T4096_H4096 and 0.99x at T4096_H7168, and the early-out stopped it at T4096_H7168. On the recorded
    sweep the same step is accepted under rule weighted, and refused under rule every."""
    import re
    from pathlib import Path

    from evo.config import load_config
    from evo.core.genome import Genome
    from evo.loop.campaign import Campaign
    from evo.search import Proposal

    root = Path(__file__).resolve().parent.parent
    champ = {"barrier": "early", "block": 128, "h_split": 2, "meta": "slice", "vec": 8}
    verdicts = {}
    for rule in ("weighted", "every"):
        text = (root / "configs" / "mhc_pre_big_fuse.yaml").read_text()
        text = re.sub(r"rule: \w+", f"rule: {rule}", text)
        text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
        p = tmp_path / f"{rule}.yaml"
        p.write_text(text + f"storage: sqlite:///{tmp_path / rule}.db\n")
        camp = Campaign(load_config(p), out=lambda s: None)
        camp.setup()
        base = camp.family.baseline()
        first = camp.evaluate(Proposal(base.replace(**champ), "test: #8 of the H200 run", [0]))
        assert first.verdict.status == "accepted", first.verdict.reason
        camp.champion = first
        step = camp.evaluate(Proposal(Genome({**first.genome, "h_split": 1}), "test: #12", [first.id]))
        verdicts[rule] = step.verdict
    assert verdicts["weighted"].status == "accepted", verdicts["weighted"].reason
    assert verdicts["every"].status == "rejected" and "T4096_H7168" in verdicts["every"].reason
