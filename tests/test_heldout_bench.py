"""Issue 42's held-out bar: a Kernel Tuner cache (from outside the repository) as the search benchmark's landscape,
evo's row made as ``evo run CACHE.json`` makes it, and the frozen list checked by sha256 before a run."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil

import pytest

from tools import search_bench as sb
from tools.heldout import HeldoutError, kt_space, read_list

FIXTURE = sb.ROOT / "tests" / "data" / "kt" / "matmul_A100.json"  # ours, in Kernel Tuner's layout (48 entries)


@pytest.fixture(scope="module")
def space():
    return sb.load_space(str(FIXTURE))


def test_a_cache_is_a_space_with_kernel_tuners_objective(space):
    doc = json.loads(FIXTURE.read_text())
    cache = doc["cache"]
    # every configuration but InvalidConfig (not launchable: never proposed) is in the space
    invalid = {k for k, e in cache.items() if e.get("time") == "InvalidConfig" or e.get("__error__") == "InvalidConfig"}
    assert space.size == len(cache) - len(invalid) > 0
    assert space.config_path == FIXTURE.resolve() and space.sweep_path == FIXTURE.resolve()
    base = cache[",".join(str(space.family.baseline()[k]) for k in doc["tune_params_keys"])]["time"]
    for g in space.genomes:
        e = cache[",".join(str(g[k]) for k in doc["tune_params_keys"])]
        t = e.get("time")
        want = base / t if isinstance(t, (int, float)) and t < 1e20 and "__error__" not in e else None
        assert space.scores[g.key] == (pytest.approx(want) if want is not None else None), g.key
    assert space.scores[space.baseline_key] == 1.0 and space.best > 1.0
    assert "simulated from a Kernel Tuner cache recorded on NVIDIA A100-PCIE-40GB" in space.recorded_backend().label


def test_the_bench_proposer_on_a_cache_is_evo_runs(space):
    """The bench's evo row on a cache gets what `evo run CACHE.json` gives its proposer (class, options, mode,
    tabu, ideas, seed)."""
    from evo.config import load_config
    from evo.ledger.memory_ledger import MemoryLedger
    from evo.loop.campaign import Campaign
    from tests.test_search_deployed import _settings

    cfg = load_config(FIXTURE, backend_override="recorded")
    deployed = Campaign(cfg, out=lambda s: None, storage=MemoryLedger()).make_proposer(1)
    bench = sb.bench_campaign(space, "config", cap=cfg.budget.attempts or 150, seed=cfg.seed).make_proposer(1)
    assert _settings(bench) == _settings(deployed)


def test_runs_on_a_cache_reach_its_best_and_count_every_proposal(space):
    run = sb.run_proposer(space, "config", 0, cap=len(space.genomes), lag=1)
    assert run.keys[0] == space.baseline_key and run.to[0.01] is not None
    assert run.to[0.01] == len(run.keys)  # no identical-SASS rejection: a cache records no machine code
    assert space.scores[run.keys[-1]] >= space.goal(0.01)


def _list(tmp_path, sha: str) -> tuple:
    d = tmp_path / "caches"
    d.mkdir(parents=True)
    gz = d / "mm.json.gz"
    gz.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    row = {
        "label": "mm",
        "repository": "someone/somewhere",
        "commit": "0" * 40,
        "path": "caches/mm.json.gz",
        "url": "https://example.invalid/mm.json.gz",
        "file": gz.name,
        "sha256": sha or hashlib.sha256(gz.read_bytes()).hexdigest(),
        "device_name": "NVIDIA A100-PCIE-40GB",
    }
    lp = tmp_path / "list.json"
    lp.write_text(json.dumps({"landscapes": [row]}))
    return lp, d


def test_the_frozen_list_is_read_with_its_sha256_checked(tmp_path):
    lp, d = _list(tmp_path, "")
    (c,) = read_list(lp, d)
    assert c.label == "mm" and c.path == d / "mm.json.gz" and c.source.startswith("someone/somewhere@0000000:")
    assert kt_space(c.path).size == sb.load_space(str(FIXTURE)).size  # .json.gz reads as the .json
    with pytest.raises(HeldoutError, match="missing .*example.invalid"):
        read_list(lp, tmp_path)
    lp2, d2 = _list(tmp_path / "x", "ab" * 32)
    with pytest.raises(HeldoutError, match="sha256 .* is not the frozen list's abab"):
        read_list(lp2, d2)


def test_bench_deployed_refuses_a_changed_cache_in_one_line(tmp_path, capsys):
    from tools import bench_deployed as bd

    lp, d = _list(tmp_path, "cd" * 32)
    assert bd.main(["--heldout", str(lp), "--cache-dir", str(d), "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bench_deployed: ") and "mm.json.gz" in err


def test_bench_deployed_runs_the_list(tmp_path, capsys):
    from tools import bench_deployed as bd

    lp, d = _list(tmp_path, "")
    shutil.copy(FIXTURE, d / "plain.json")  # (a --landscape path beside the list's)
    out = tmp_path / "res"
    argv = ["--heldout", str(lp), "--cache-dir", str(d), "--landscape", f"plain={d / 'plain.json'}"]
    argv += ["--seeds", "2", "--select-seeds", "2", "--cap", "20", "--lags", "1", "--strategies", "evo random"]
    assert bd.main([*argv, "--out", str(out)]) == 0
    table = (out / "table.md").read_text()
    assert "| plain | evo random |" in table and "| mm | evo random |" in table
    assert "- mm: from someone/somewhere@0000000:caches/mm.json.gz (sha256 " in table
    runs = json.loads(gzip.open(out / "runs.json.gz", "rt").read())
    assert runs["mm"]["sweep"] == str(d / "mm.json.gz") and len(runs["mm"]["runs"]["test"]["evo lag 1"]) == 2


def test_an_interval_with_infinite_draws_is_infinite_not_nan():
    """A held-out landscape where evo's runs mostly miss: some bootstrap draws have no success (infinite ERT); the
    interval's bounds are order statistics, infinite where the draws are, never nan (inf - inf)."""
    import math

    from tools import search_metrics as sm

    peer = [sm.Outcome(40, True)] * 17 + [sm.Outcome(150, False)] * 3
    assert sm.bootstrap_one([sm.Outcome(150, False)] * 20, peer) == (math.inf, math.inf)
    lo, hi = sm.bootstrap_one([sm.Outcome(150, False)] * 17 + [sm.Outcome(10, True)] * 3, peer)
    assert math.isfinite(lo) and lo > 1.0 and hi == math.inf
    point, glo, ghi = sm.bootstrap_geomean([([sm.Outcome(5, True)] * 3, [sm.Outcome(10, True)] * 3)] * 2)
    assert (point, glo, ghi) == (0.5, 0.5, 0.5)


def test_bench_deployed_passes_options_to_evos_row_only(tmp_path, monkeypatch):
    """``--options`` (an option tested before it is the default) reaches evo's test runs, not the peers', and the
    table's command line says so; malformed JSON is a usage error, not a traceback."""
    from tools import bench_deployed as bd

    seen: list[tuple[list[str], object]] = []
    real = sb.bench

    def spy(space, seeds, strategies, **kw):
        seen.append(([s.label for s in strategies], kw.get("evo_options")))
        return real(space, seeds, strategies, **kw)

    monkeypatch.setattr(sb, "bench", spy)
    out = tmp_path / "res"
    argv = ["--landscape", f"plain={FIXTURE}", "--seeds", "1", "--select-seeds", "1", "--cap", "12", "--lags", "1"]
    argv += ["--strategies", "evo random", "--options", '{"portfolio": 3}', "--out", str(out)]
    assert bd.main(argv) == 0
    assert ([sb.EVO], {"portfolio": 3}) in seen and (["evo random"], None) in seen
    assert "evo's options over the deployed config's: {\"portfolio\": 3}" in (out / "table.md").read_text()
    for bad in ("{portfolio", "[3]", '{"portfolio": -1}', '{"portfolo": 3}'):  # refused before any run
        with pytest.raises(SystemExit) as e:
            bd.main(["--landscape", f"plain={FIXTURE}", "--options", bad])
        assert e.value.code == 2, bad
