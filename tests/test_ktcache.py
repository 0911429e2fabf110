"""Kernel Tuner cache files both ways: read one as a recorded landscape and replay it with `evo run` on the CPU
(harness/ktcache.py); write a recorded sweep as one that Kernel Tuner's simulation mode accepts (`evo kt-cache`,
harness/ktcache_write.py).

The fixture tests/data/kt/matmul_A100.json is made up, in Kernel Tuner's layout (a header, one entry per line):
4 knobs, 48 configurations, an interior optimum, and one invalid entry of each kind published caches hold
("time": "InvalidConfig" as Kernel Tuner 0.4-1.0 wrote it, "__error__": "CompilationFailedConfig" as 1.x writes it,
"time": "RuntimeFailedConfig", and a 0.x "time": 1e20).
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest

from evo.cli import main
from evo.config import load_config
from evo.core.genome import Genome
from harness.ktcache import (
    KTCacheBackend,
    KTCacheError,
    kt_family,
    kt_landscape,
    kt_sweep,
    read_kt_cache,
)
from harness.ktcache_write import kt_cache_text, sweep_to_kt_cache, write_kt_cache

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "kt" / "matmul_A100.json"
EXAMPLE = ROOT / "examples" / "fused_add_rmsnorm"
DEVICE = "NVIDIA A100-PCIE-40GB"


def _genome(bx: int, by: int, tx: int, sh: int) -> str:
    return Genome({"block_size_x": bx, "block_size_y": by, "tile_size_x": tx, "use_shared": sh}).key


def test_reads_the_published_layout_with_every_kind_of_invalid_entry():
    c = read_kt_cache(FIXTURE)
    assert (c.device_name, c.kernel_name, c.problem_size) == (DEVICE, "matmul_kernel", [4096, 4096])
    assert c.objective == "time" and c.problem_text == "4096x4096"
    assert list(c.tune_params) == ["block_size_x", "block_size_y", "tile_size_x", "use_shared"]
    assert len(c.entries) == 48 and len(c.valid()) == 41
    errors = {k: e.error for k, e in c.entries.items() if e.error}
    assert errors[_genome(128, 4, 1, 0)] == "InvalidConfig"  # "time": "InvalidConfig"
    assert errors[_genome(16, 1, 2, 1)] == "CompilationFailedConfig"  # "__error__", no time
    assert errors[_genome(128, 2, 2, 0)] == "RuntimeFailedConfig"  # "time": "RuntimeFailedConfig"
    assert errors[_genome(16, 4, 1, 0)] == "RuntimeFailedConfig"  # Kernel Tuner 0.x: time 1e20
    assert sorted(set(errors.values())) == ["CompilationFailedConfig", "InvalidConfig", "RuntimeFailedConfig"]
    # the baseline: the valid configuration whose values come first in each knob's list
    assert c.baseline().params == {"block_size_x": 16, "block_size_y": 1, "tile_size_x": 1, "use_shared": 0}
    best = max((v, k) for k, v in c.objectives().items() if v is not None)[1]
    assert best == _genome(64, 2, 2, 1)


def test_gzip_and_a_cache_left_open_by_a_killed_run(tmp_path):
    text = FIXTURE.read_text()
    gz = tmp_path / "matmul_A100.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    # a run killed mid-way: no closing brackets, a trailing comma after the last entry
    opened = tmp_path / "open.json"
    opened.write_text(text.strip()[: -len("}\n}")] + ",")
    want = read_kt_cache(FIXTURE)
    for p in (gz, opened):
        got = read_kt_cache(p)
        assert {k: (e.time_ms, e.error) for k, e in got.entries.items()} == {
            k: (e.time_ms, e.error) for k, e in want.entries.items()
        }


def test_an_old_cache_without_problem_size_objective_or_params_in_its_entries(tmp_path):
    """The oldest caches have no problem_size nor objective, and some entries only their key."""
    p = tmp_path / "vector_add.json"
    p.write_text(
        json.dumps(
            {
                "device_name": "GeForce GTX 1080",
                "kernel_name": "vector_add",
                "tune_params_keys": ["block_size_x"],
                "tune_params": {"block_size_x": [64, 128, 256]},
                "cache": {"64": {"time": 0.05}, "128": {"block_size_x": 128, "time": 0.04}, "256": {"time": 1e20}},
            }
        )
    )
    fam, geos, sweep = kt_landscape(p)
    assert [k.values for k in fam.knobs] == [(64, 128, 256)] and geos[0].params == {"problem_size": "none"}
    assert fam.kt.entries[Genome({"block_size_x": 64}).key].time_ms == 0.05
    assert fam.kt.entries[Genome({"block_size_x": 256}).key].error == "RuntimeFailedConfig"
    assert sweep["baseline_key"] == Genome({"block_size_x": 64}).key


@pytest.mark.parametrize(
    "content, says",
    [
        ("not json at all", "not JSON"),
        ('{"device_name": "x", "cache": {}}', "missing kernel_name, tune_params_keys, tune_params"),
        ("[1, 2]", "not an object"),
    ],
)
def test_a_file_that_is_no_cache_is_one_line(tmp_path, content, says):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(KTCacheError, match=says) as e:
        read_kt_cache(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_reader_agrees_with_kernel_tuners_own(tmp_path):
    util = pytest.importorskip("kernel_tuner.util")
    copy = tmp_path / "c.json"
    shutil.copy(FIXTURE, copy)
    theirs = util.read_cache(str(copy), open_cache=False)
    ours = read_kt_cache(copy)
    by_key = {e.key: e for e in ours.entries.values()}
    assert set(by_key) == set(theirs["cache"])
    for key, r in theirs["cache"].items():
        assert (by_key[key].error is not None) == ("__error__" in r or r.get("time", 0) >= 1e20), key
        if by_key[key].error is None:
            assert by_key[key].time_ms == r["time"]


def test_the_backend_serves_the_caches_time_as_the_median_and_names_the_device():
    fam, geos, _ = kt_landscape(FIXTURE)
    be = KTCacheBackend(fam, geos)
    assert "H200" not in be.label and DEVICE in be.label and be.facts()["name"] == DEVICE
    e = fam.kt.entries[_genome(64, 2, 2, 1)]
    loaded = be.load(None, e.params)
    s = be.measure([("cand", loaded)], geos[0], 50)
    assert statistics.median(s.times_us["cand"]) == pytest.approx(e.time_ms * 1000.0)
    assert len(s.times_us["cand"]) == len(e.times_ms)
    # InvalidConfig (and anything the cache lacks) is ruled out before a build; the other two fail as they did
    assert fam.check(fam.kt.entries[_genome(128, 4, 1, 0)].params, geos) is not None
    assert fam.check(fam.kt.entries[_genome(16, 1, 2, 1)].params, geos) is None


def _config(tmp_path: Path, attempts: int = 16) -> Path:
    cfg = tmp_path / "kt.yaml"
    cfg.write_text(
        f"campaign: kt_matmul\nfamily: {FIXTURE}\ngeometries: [{{weight: 1}}]\nbudget: {{attempts: {attempts}}}\n"
        f"storage: sqlite:///{tmp_path / 'ledger.db'}\npeer: {{torch_compile: 'off'}}\n"
    )
    return cfg


def test_evo_run_replays_a_kernel_tuner_cache_on_the_cpu(tmp_path, capsys):
    cfg = _config(tmp_path)
    c = load_config(cfg)
    assert c.family.name == "matmul_A100"
    assert [k.name for k in c.family.knobs] == list(read_kt_cache(FIXTURE).tune_params)  # the knobs: tune_params
    assert main(["run", str(cfg), "--plain"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines[0].endswith(f"simulated from a Kernel Tuner cache recorded on {DEVICE}")
    assert "H200" not in out
    from evo.ledger.ledger import Ledger

    led = Ledger(c.storage, c.campaign, c.family.knobs, readonly=True)
    atts = led.attempts()
    assert len(atts) == 16 and led.meta("device")["name"] == DEVICE
    keys = {Genome(a.genome).key for a in atts}
    invalid = {k for k, e in c.family.kt.entries.items() if e.error == "InvalidConfig"}
    assert not keys & invalid  # never proposed, as Kernel Tuner's restrictions would
    kinds = {Genome(a.genome).key: a.verdict.kind for a in atts if a.verdict.status == "error"}
    assert set(kinds.values()) <= {"compile", "launch"}
    champ = led.champion()
    objectives = c.family.kt.objectives()
    assert objectives[Genome(champ.genome).key] >= 0.95 * max(v for v in objectives.values() if v)
    log = (tmp_path / "attempts.md").read_text() if (tmp_path / "attempts.md").is_file() else ""
    assert "H200" not in log
    # and the campaign's own measurements back out as a cache, in the order it measured them (KTdashboard's index)
    out = tmp_path / "campaign.json"
    assert main(["kt-cache", str(cfg), "--ledger", "-o", str(out)]) == 0
    back = read_kt_cache(out)
    measured = [a for a in atts if a.timings or a.verdict.status == "error"]
    assert back.device_name == DEVICE and [e.key for e in back.entries.values()] == [
        ",".join(str(a.genome[k]) for k in c.family.kt.tune_params) for a in measured
    ]
    g = c.geometries[0].name
    for a in measured:
        e = back.entries[Genome(a.genome).key]
        assert e.error is not None if a.verdict.status == "error" else e.time_ms == a.timings[g].median_us / 1000


def test_evo_check_on_a_cache_says_not_checked_and_exits_3(tmp_path, capsys):
    """A cache has no kernel: `evo check` can check nothing, so it says so and exits 3 ("could not check here"),
    neither 0 (clean) nor 2 (the config is good: `evo run` replays it)."""
    from evo.check import run_check

    cfg = _config(tmp_path)
    ok, line = run_check(cfg, gpu=False, say=lambda s: None)
    assert not ok and line.startswith("evo check: not checked: family matmul_A100 is a Kernel Tuner cache")
    assert main(["check", str(cfg), "--cpu"]) == 3


def test_the_cache_itself_is_a_config(tmp_path, monkeypatch):
    """`evo run CACHE.json`: the campaign named after the file, its one geometry, the recorded backend."""
    monkeypatch.chdir(tmp_path)
    c = load_config(FIXTURE)
    assert (c.campaign, c.backend, c.budget.attempts) == ("matmul_A100", "recorded", 41)  # 41 valid (< 150)
    assert [g.params for g in c.geometries] == [{"problem_size": "4096x4096"}] and c.peer.torch_compile == "off"
    assert str(tmp_path / "logs" / "matmul_A100") in c.storage
    bad = tmp_path / "bad.json"
    bad.write_text('{"device_name": "x"}')
    from evo.config import ConfigError

    with pytest.raises(ConfigError, match="not a Kernel Tuner cache"):
        load_config(bad)


def test_a_backend_isolated_in_a_worker_keeps_the_caches_label(tmp_path):
    from harness.worker import WorkerBackend

    kwargs = {"config": str(_config(tmp_path)), "backend": "recorded", "storage": None}
    wb = WorkerBackend("evo.backend_factories:recorded_backend", kwargs, 60.0)
    try:
        assert wb.simulated and wb.label == f"simulated from a Kernel Tuner cache recorded on {DEVICE}"
    finally:
        wb.close()


def test_a_kernel_tuner_cache_never_runs_on_the_gpu_backend(tmp_path):
    from evo.loop.errors import CampaignError
    from evo.loop.seams import make_backend

    c = load_config(_config(tmp_path), backend_override="gpu")
    with pytest.raises(CampaignError, match="replays on backend: recorded only"):
        make_backend(c, None)  # type: ignore[arg-type]


def _simulate(path: Path, doc: dict, strategy: str = "brute_force", **options):
    """Kernel Tuner's own simulation mode on the cache at ``path``."""
    kt = pytest.importorskip("kernel_tuner")
    res, env = kt.tune_kernel(
        doc["kernel_name"],
        "",
        tuple(doc["problem_size"]),
        [],
        doc["tune_params"],
        strategy=strategy,
        strategy_options=options or None,
        cache=str(path),
        simulation_mode=True,
        quiet=True,
    )
    return res, env


def test_written_cache_is_accepted_by_kernel_tuners_simulation_mode(tmp_path):
    fam, _, data = kt_landscape(FIXTURE)
    doc = sweep_to_kt_cache(fam, data)
    path = write_kt_cache(tmp_path / "out.json", doc)
    text = path.read_text()
    assert text.endswith("}\n}") and json.loads(text)["device_name"] == DEVICE  # KTdashboard's reader
    res, env = _simulate(path, doc)
    assert env["device_name"] == DEVICE and len(res) == 48
    orig = {e.key: e for e in read_kt_cache(FIXTURE).entries.values()}
    for r in res:
        key = ",".join(str(r[k]) for k in doc["tune_params_keys"])
        if orig[key].error is None:
            assert "__error__" not in r and r["time"] == pytest.approx(orig[key].time_ms)
        else:  # the same class of error as the cache it came from (0.x's 1e20 read as RuntimeFailedConfig)
            assert str(r["__error__"]) == orig[key].error
    # KTdashboard keeps entries whose objective is a number: every entry has one, valid ones a float
    cache = json.loads(text)["cache"]
    assert all("time" in e for e in cache.values()) and isinstance(next(iter(cache.values()))["time"], float)


def test_evo_kt_cache_writes_a_shipped_sweep_kernel_tuner_replays(tmp_path, capsys):
    out = tmp_path / "rmsnorm.json"
    assert main(["kt-cache", str(EXAMPLE), "-o", str(out), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["path"] == str(out) and rec["device_name"] == "NVIDIA H200" and rec["valid"] > 0
    assert main(["kt-cache", str(EXAMPLE), "-o", str(out)]) == 2  # no file replaced without --force
    doc = json.loads(out.read_text())
    res, _ = _simulate(out, doc, "random_sample", max_fevals=10)
    served = [r for r in res if "__error__" not in r]
    assert served and all(isinstance(r["time"], float) for r in served)
    # and evo reads it back: the same times, the same device
    back = read_kt_cache(out)
    assert back.device_name == "NVIDIA H200" and len(back.valid()) == rec["valid"]


def test_a_caches_own_sweep_round_trips_through_the_writer(tmp_path):
    cache = read_kt_cache(FIXTURE)
    doc = sweep_to_kt_cache(kt_family(cache), kt_sweep(cache))
    assert doc["problem_size"] == [4096, 4096]  # a cache's family gives back its own problem size
    gz = write_kt_cache(tmp_path / "rt.json.gz", doc)
    assert gzip.decompress(gz.read_bytes()).decode() == kt_cache_text(doc)
    back = read_kt_cache(gz)
    assert {k: e.error for k, e in back.entries.items()} == {k: e.error for k, e in cache.entries.items()}
    for k, e in cache.valid().items():
        assert back.entries[k].time_ms == pytest.approx(e.time_ms, rel=1e-12)
