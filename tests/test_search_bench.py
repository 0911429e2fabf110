"""The search-efficiency benchmark (tools/search_bench.py) and the Optuna proposers, on the recorded mhc sweep."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from evo.core.family import Family, Geometry, Knob, Launch
from evo.core.genome import Genome
from evo.core.records import BASELINE, Attempt, Verdict
from evo.search import NSGA2, PROPOSERS, TPE, OptunaSampler
from tools import search_bench as sb


@pytest.fixture(scope="module")
def space() -> sb.Space:
    return sb.load_space("mhc_pre_big_fuse")


# --- the recorded objective ---------------------------------------------------------------------
def test_objective_lookup_on_the_real_sweep(space):
    base = space.family.baseline()
    assert space.objective(base) == pytest.approx(1.0, abs=1e-12)
    assert space.size == 1152
    assert space.best > 1.9
    assert any((v or 0) > 1.9 for v in space.scores.values())
    # The exact-mode rule: split_reduce=warp changes the summation order at the decode geometry -> invalid.
    assert space.objective(base.replace(split_reduce="warp")) is None
    assert all(space.objective(g) is not None for g in space.genomes if g["split_reduce"] == "serial")
    hits = space.hits()
    assert hits and all(space.scores[k] >= 0.99 * space.best for k in hits)


def test_objective_resolves_same_as_and_rejects_bad_entries():
    ok_checks = [["G", 0, "out", ["=", "="], 0, 0, 0.0, 0.0, ""]]
    data = {
        "baseline_key": "b",
        "geometries": [{"name": "G", "weight": 1.0}, {"name": "W", "weight": 0.0}],
        "genomes": {
            "b": {"status": "ok", "checks": ok_checks, "t": {"G": [10.0, 10.0, 10.0], "W": [1.0]}},
            "fast": {"status": "ok", "checks": ok_checks, "t": {"G": [5.0, 4.0, 6.0], "W": [9.0]}},
            "alias": {"same_as": "fast"},
            "wrong": {"status": "ok", "checks": [["G", 0, "out", ["=", "abc"], 0, 0, 0.0, 0.0, ""]], "t": {"G": [1.0]}},
            "crashed": {"status": "crash", "checks": ok_checks, "t": {"G": [1.0]}},
        },
    }
    s = sb.sweep_objectives(data)
    assert s["b"] == 1.0 and s["fast"] == pytest.approx(2.0) and s["alias"] == pytest.approx(2.0)
    assert s["wrong"] is None and s["crashed"] is None


# --- evo's proposers, driven like a campaign ---------------------------------------------------------
@pytest.mark.parametrize("name", ["surrogate", "evolutionary", "random", "tpe", "nsga2"])
def test_evo_side_strategies_never_repeat(space, name):
    run = sb.run_proposer(space, name, seed=1, cap=60, until_target=False)
    assert len(run.keys) == 60
    assert len(set(run.keys)) == len(run.keys), f"{name} repeated a genome"
    assert all(space.family.check(Genome.from_key(k), space.geometries) is None for k in run.keys)
    # The campaign's tabu: once split_reduce=warp was rejected, it is never proposed again.
    warp = [i for i, k in enumerate(run.keys) if Genome.from_key(k)["split_reduce"] == "warp"]
    assert len(warp) <= 1


def test_three_seeds_of_evolutionary_and_random_reach_the_target(space):
    for name in ("evolutionary", "random"):
        runs = [sb.run_proposer(space, name, seed) for seed in range(3)]
        for r in runs:
            assert r.ok and 1 <= r.evals <= space.size
            assert len(r.keys) - r.pre_gpu == r.evals  # pre-GPU rejections (the exact rule) are no evaluations
            assert space.scores[r.keys[-1]] >= space.target
            assert all((space.scores[k] or 0) < space.target for k in r.keys[:-1])
        st = sb.stats(runs, space.size)
        assert st["success"] == 3 and st["min"] <= st["median"] <= st["max"]


def test_table_and_verdict_lines(space):
    runs = {
        sb.EVO: [sb.Run(sb.EVO, i, e) for i, e in enumerate([10, 20, 30])],
        "peer": [sb.Run("peer", i, e) for i, e in enumerate([40, 60, None])],
    }
    lines = sb.table(runs, 100)
    assert lines[0].startswith("| strategy | median evals | IQR | min–max | success rate |")
    assert "| peer | 60 | 50–80 (width 30) | 40–100 | 2/3 (67%) |" in lines
    v = sb.verdict(runs, 100)
    assert v[0].startswith(f"best strategy: {sb.EVO}")
    assert "20 / 60 (peer) = 0.33 (meets" in v[1]
    # evo's own other proposers are no peers: the bar is about random, Optuna and Kernel Tuner
    runs["evo evolutionary"] = [sb.Run("evo evolutionary", i, e) for i, e in enumerate([5, 5, 5])]
    v = sb.verdict(runs, 100)
    assert v[0].startswith("best strategy: evo evolutionary") and "20 / 60 (peer) = 0.33 (meets" in v[1]


# --- the Optuna proposers ------------------------------------------------------------------------------
@dataclass
class Tiny(Family):
    forbid: tuple | None = None

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        if self.forbid is not None and (genome["a"], genome["b"]) == self.forbid:
            return "ruled out"
        return None

    def outputs(self, geometry):
        return []

    def make_inputs(self, geometry, seed, device):
        return {}

    def reference(self, inputs, geometry, dtype=None):
        return {}

    def launch(self, genome, geometry):
        return Launch((1, 1, 1), (32, 1, 1))

    def kernel_args(self, inputs, outputs, geometry):
        return []


GEO = [Geometry("g", {"T": 1}, 1.0)]


def _tiny(forbid=None) -> Tiny:
    return Tiny(name="tiny", knobs=(Knob("a", (1, 2, 3), 1), Knob("b", ("x", "y"), "x")), forbid=forbid)


def _attempt(i: int, g: Genome, score: float | None, origin: str = "") -> Attempt:
    v = (
        Verdict(BASELINE, None, "base")
        if i == 0
        else (Verdict.rejected("perf", "slow") if score is not None else Verdict.rejected("correctness", "wrong"))
    )
    return Attempt(i, "t", "tiny", dict(g), g.key, origin, verdict=v, score=score)


def test_registered_with_options_tables():
    assert PROPOSERS["tpe"] is TPE and PROPOSERS["nsga2"] is NSGA2 and PROPOSERS["optuna"] is OptunaSampler
    assert set(TPE.OPTIONS) == {"sampler_options", "retries"}
    assert "sampler" in OptunaSampler.OPTIONS
    OptunaSampler.validate_options({"sampler": "RandomSampler", "retries": 5})
    TPE.validate_options({"sampler_options": {"n_startup_trials": 3}})
    for cls, bad, what in [
        (OptunaSampler, {"sampler": "Nope"}, "sampler"),
        (TPE, {"retries": 0}, "retries"),
        (TPE, {"sampler_options": {"no_such": 1}}, "sampler_options"),
        (TPE, {"sampler_options": {"seed": 1}}, "sampler_options"),
        (NSGA2, {"sampler": "TPESampler"}, "sampler"),
    ]:
        with pytest.raises(ValueError, match=f"^{what}:"):
            cls.validate_options(bad)


@pytest.mark.parametrize("cls", [TPE, NSGA2])
def test_optuna_proposers_exhaust_a_tiny_space_without_repeats(cls):
    fam = _tiny(forbid=(2, "y"))
    prop = cls(fam, GEO, {"retries": 20}, 0)
    base = fam.baseline()
    attempts = [_attempt(0, base, 1.0)]
    seen = {base.key}
    while True:
        p = prop.propose(attempts, set(seen))
        if p is None:
            break
        assert p.genome.key not in seen and fam.check(p.genome, GEO) is None
        attempts.append(_attempt(len(attempts), p.genome, 1.0 + 0.1 * len(attempts), p.origin))
        seen.add(p.genome.key)
    assert len(seen) == 5  # 3 x 2 minus the forbidden one
    trials = prop.study.get_trials(deepcopy=False)
    dups = [t for t in trials if t.user_attrs.get("duplicate")]
    bad = [t for t in trials if "invalid" in t.user_attrs]
    assert all(t.state.name == "FAIL" for t in bad)
    # A duplicate is told with the known score of the genome it repeats.
    known = {a.genome_key: a.score for a in attempts}
    for t in dups:
        assert t.value == pytest.approx(known[Genome(t.params).key])
    told = [t for t in trials if not t.user_attrs.get("duplicate") and "invalid" not in t.user_attrs]
    assert len(told) == 5 and all(t.state.name == "COMPLETE" for t in told)


def test_optuna_proposer_falls_back_to_random_and_says_so():
    fam = _tiny()
    base = fam.baseline()
    # Every genome but one is known: with 1 ask the sampler mostly proposes a tried one.
    others = [Genome({"a": a, "b": b}) for a in (1, 2, 3) for b in ("x", "y")]
    attempts = [_attempt(0, base, 1.0)] + [_attempt(i + 1, g, 0.5) for i, g in enumerate(others[1:-1])]
    seen = {a.genome_key for a in attempts}
    origins = set()
    for seed in range(8):
        p = TPE(fam, GEO, {"retries": 1}, seed).propose(attempts, set(seen))
        assert p is not None and p.genome.key not in seen and p.genome == others[-1]
        origins.add(p.origin.split(":")[0].split(" ")[0])
    assert "random" in origins


def test_optuna_proposer_tells_failed_attempts_as_fail():
    fam = _tiny()
    prop = TPE(fam, GEO, {}, 0)
    base = fam.baseline()
    bad = base.replace(a=3)
    prop.propose([_attempt(0, base, 1.0), _attempt(1, bad, None)], {base.key, bad.key})
    states = {
        Genome(t.params).key: t.state.name for t in prop.study.get_trials(deepcopy=False) if "attempt" in t.user_attrs
    }
    assert states == {base.key: "COMPLETE", bad.key: "FAIL"}


# --- Kernel Tuner's simulation mode -----------------------------------------------------------------------
def test_kernel_tuner_cache_and_simulated_runs(space, tmp_path):
    if sb.kernel_tuner_missing():
        pytest.skip(sb.kernel_tuner_missing())
    from kernel_tuner import util

    path = sb.write_kt_cache(space, tmp_path / "c.json", (4096, 4096))
    cache = util.read_cache(str(path), open_cache=False)
    assert cache["tune_params_keys"] == [k.name for k in space.family.knobs]
    assert len(cache["cache"]) == space.size
    base = cache["cache"][sb.kt_key(space, space.family.baseline())]
    assert base["time"] == pytest.approx(1.0) and "__error__" not in base
    warp = cache["cache"][sb.kt_key(space, space.family.baseline().replace(split_reduce="warp"))]
    assert isinstance(warp["__error__"], util.RuntimeFailedConfig)
    assert base["benchmark_time"] == sb.EVAL_MS
    for strategy in sb.KT_STRATEGIES[:2]:
        r = sb.run_kernel_tuner(space, strategy, 0, path, (4096, 4096))
        assert r.ok and len(set(r.keys)) == len(r.keys) == r.evals + r.pre_gpu
        assert space.scores[r.keys[-1]] >= space.target
    # Seeded and independent of wall-clock time: the same seed gives the same search.
    a, b = (sb.run_kernel_tuner(space, "bayes_opt", 3, path, (4096, 4096), {"exact_rule": True}) for _ in range(2))
    assert a.keys == b.keys and a.ok
    assert all(Genome.from_key(k)["split_reduce"] == "serial" for k in a.keys)  # the exact rule as a restriction


def test_kernel_tuner_strategies_are_skipped_with_the_reason(space, monkeypatch):
    monkeypatch.setattr(sb, "kernel_tuner_missing", lambda: "kernel_tuner is not importable (test)")
    said: list[str] = []
    kt = next(s for s in sb.STRATEGIES if s.kind == "kt")
    runs, skipped = sb.bench(space, 1, [sb.STRATEGIES[0], kt], out=said.append)
    assert list(runs) == [sb.EVO] and skipped == {kt.label: "kernel_tuner is not importable (test)"}
    assert any(line.startswith(f"{kt.label}: skipped: kernel_tuner is not importable") for line in said)


# --- campaign settings, tolerance mode, identical SASS, seeds -------------------------------------------------
def test_campaign_settings_come_from_the_family_config():
    assert sb.campaign_settings("mhc_pre_big_fuse")["mode"] == "exact"
    assert sb.campaign_settings("mhc_prenorm_gemm")["mode"] == "tolerance"
    assert sb.campaign_settings("no_such_family")["mode"] == "exact"  # no config: the defaults


def test_tolerance_mode_accepts_small_errors_and_rejects_large_ones():
    ok = ["G", 0, "out", ["=", "="], 0, 0, 1e-3, 0.0, ""]
    near = ["G", 0, "out", ["h1", "h1"], 0, 0, 1.5e-3, 0.0, ""]
    far = ["G", 0, "out", ["h2", "h2"], 0, 0, 3e-3, 0.0, ""]
    race = ["G", 0, "out", ["h3", "h4"], 0, 0, 1e-3, 0.0, ""]
    oob = ["G", 0, "out", ["=", "="], 0, 0, 1e-3, 0.0, "", 16]  # newer sweeps record guard-band damage
    t = {"G": [10.0, 10.0, 10.0]}
    data = {
        "baseline_key": "b",
        "baseline_errors": {"G/0/out": 1e-3},
        "geometries": [{"name": "G", "weight": 1.0}],
        "genomes": {
            k: {"status": "ok", "checks": [c], "t": t}
            for k, c in (("b", ok), ("near", near), ("far", far), ("race", race), ("oob", oob))
        },
    }
    exact = sb.sweep_objectives(data)
    assert exact["b"] == 1.0 and exact["near"] is None and exact["far"] is None and exact["oob"] is None
    tol = sb.sweep_objectives(data, "tolerance", 2.0)
    assert tol["near"] == 1.0 and tol["far"] is None and tol["race"] is None and tol["oob"] is None


def test_identical_sass_is_an_attempt_without_a_measurement(space):
    import dataclasses

    # Pretend every warp0_stream=True genome compiles to one machine code per (block, vec).
    sass = {
        k: (f"w0-{g['block']}-{g['vec']}" if g["warp0_stream"] else k)
        for k, g in ((k, Genome.from_key(k)) for k in space.scores)
    }
    twins = dataclasses.replace(space, sass=sass)
    run = sb.run_proposer(twins, "random", seed=2, cap=300, until_target=False)
    assert run.notes.get("identical_sass", 0) > 0
    assert run.pre_gpu == run.notes["identical_sass"] + sum(1 for k in run.keys if k in twins.ruled)
    # Given the digests (static_key, not wired in evo run) the surrogate never spends an attempt on known code ...
    run = sb.run_proposer(twins, "surrogate", seed=2, cap=120, until_target=False, static_key=True)
    assert run.notes.get("identical_sass", 0) == 0
    # ... and by default, as in a campaign, it does not have them.
    run = sb.run_proposer(twins, "surrogate", seed=2, cap=120, until_target=False)
    assert run.notes.get("identical_sass", 0) > 0


def test_first_seed_and_exact_rule_skipped_in_tolerance_mode(space, monkeypatch):
    import dataclasses

    said: list[str] = []
    evo = sb.STRATEGIES[0]
    runs, _ = sb.bench(space, 2, [evo], out=said.append, first_seed=100)
    assert [r.seed for r in runs[sb.EVO]] == [100, 101]
    tol = dataclasses.replace(space, mode="tolerance")
    monkeypatch.setattr(sb, "kernel_tuner_missing", lambda: None)
    kt = next(s for s in sb.STRATEGIES if s.options.get("exact_rule"))
    runs, skipped = sb.bench(tol, 1, [kt], out=said.append)
    assert not runs and "tolerance mode" in skipped[kt.label]


def test_doc_blocks_per_family_tabu_and_first_seed(space, tmp_path):
    import argparse

    doc = tmp_path / "d.md"
    tag = "search-bench-mhc_pre_big_fuse"
    doc.write_text(f"intro\n\n<!-- {tag}:begin -->\nold\n<!-- {tag}:end -->\n\noutro\n")
    runs = {sb.EVO: [sb.Run(sb.EVO, 0, 10)]}
    for no_tabu, first in ((False, 0), (True, 0), (False, 100)):
        args = argparse.Namespace(no_tabu=no_tabu, first_seed=first, seeds=1, no_static_key=False)
        sb.write_doc(doc, space, runs, {}, sb.table(runs, 100), sb.verdict(runs, 100), args)
    text = doc.read_text()
    assert text.startswith("intro\n") and "\noutro\n" in text and "\nold\n" not in text
    for tag in (
        "search-bench-mhc_pre_big_fuse",
        "search-bench-mhc_pre_big_fuse-no-tabu",
        "search-bench-mhc_pre_big_fuse-from-100",
    ):
        assert text.count(f"<!-- {tag}:begin -->") == 1 and text.count(f"<!-- {tag}:end -->") == 1
    assert "Seeds: 1 (100..100)" in text and "correctness mode exact" in text


def test_jobs_give_the_same_runs_sooner(space):
    """--jobs runs the seeds of evo's (and Optuna's) strategies in forked processes: every run is seeded, so the
    runs are the same as in one process, in seed order."""
    chosen = [s for s in sb.STRATEGIES if s.label in ("evo surrogate", "evo random", "optuna NSGA-II")]
    one, _ = sb.bench(space, 3, chosen, out=lambda _: None, first_seed=5)
    two, _ = sb.bench(space, 3, chosen, out=lambda _: None, first_seed=5, jobs=2)
    assert one.keys() == two.keys() and len(one) == 3
    for label in one:
        assert [(r.strategy, r.seed, r.evals, r.keys) for r in one[label]] == [
            (r.strategy, r.seed, r.evals, r.keys) for r in two[label]
        ], label
    assert sb._POOL_SPACE is None


def test_bench_bound_median_lower_bound(space, capsys):
    from tools import bench_bound as bb

    # 20 runs: the median is the mean of the 10th and 11th; both exceed the cap when at most 9 reached it
    assert bb.median_at_least(9, 20, 107) == 108 and bb.median_at_least(10, 20, 107) is None
    assert bb.median_at_least(10, 21, 50) == 51 and bb.median_at_least(11, 21, 50) is None
    assert bb.median_at_least(0, 1, 5) == 6
    assert bb.exact_median([5, 7, 9], 4) == 8 and bb.exact_median([5, 7], 4) is None  # 4 runs: middle 2nd, 3rd
    assert bb.exact_median([3, 1, 2], 5) == 3 and bb.exact_median([1, 2], 5) is None
    bb.main(["--family", "mhc_pre_big_fuse", "--strategy", "random", "--cap", "3", "--seeds", "3"])
    out = capsys.readouterr().out
    assert out.count("seed ") == 3 and "evo random on mhc_pre_big_fuse: " in out
    runs = [sb.run_proposer(space, "random", s, cap=3) for s in range(3)]
    reached = sum(r.ok for r in runs)
    assert f"{reached} of 3 runs reached the target within 3 evaluations" in out
    assert all(len(r.keys) <= 3 for r in runs)


# --- the benchmark drives the campaign loop ------------------------------------------------------------
def test_a_bench_run_is_the_campaign_loop_on_the_recorded_backend(space, tmp_path):
    """run_proposer is evo.loop.campaign.Campaign on the recorded backend: the same proposer and seed in a Campaign of
    the shipped config (its NVRTC build, its gates, an SQLite ledger) propose the same genomes, and every verdict the
    benchmark did not take from the recorded objective (its perf gate) is the campaign's own."""
    from evo.config import load_config
    from evo.loop.campaign import Campaign
    from tests.test_campaign import write_config

    bench = sb.bench_campaign(space, "config", cap=15, seed=0, until_target=False)
    bench.run()
    got = bench.ledger.attempts()
    assert [a.genome_key for a in got] == sb.run_proposer(space, "config", 0, cap=15, until_target=False).keys
    camp = Campaign(load_config(write_config(tmp_path, 15)), out=lambda s: None)  # its own proposer, seed 0
    camp.run()
    want = camp.ledger.attempts()
    assert [a.genome_key for a in want] == [a.genome_key for a in got]
    # told the correctness mode by the factory (exact), the deployed surrogate proposes no genome the exact-mode
    # rule rejects (the bench's own proposer, before issue 42, was not told and spent attempts on them)
    assert not any(a.verdict.gate == "correctness" for a in got)
    assert [a.verdict.gate for a in got[1:]] == [b.verdict.gate for b in want[1:]]
