"""Sharded sweeps (tools/sweep.py --shard I/N) and their merge (tools/merge_sweeps.py), on CPU.

Two ways to make shards of the recorded mhc_pre_big_fuse sweep: partitioning its genomes by position in the
seeded order (what --shard does), and running tools/sweep.py itself with a stand-in GPU that serves the recorded
measurements (so the --shard, --compile-only and --limit-s code paths run). Either way the merge must give what
the unsharded sweep gives, to harness/recorded.py and to tools/search_bench.py.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import harness.gpu
import harness.recorded as recorded
from evo.config import load_config
from evo.config import narrow_to_recorded as recorded_narrow
from evo.core.genome import Genome
from harness import sweepfile
from harness.recorded import RecordedBackend
from tools import merge_sweeps as ms
from tools import search_bench as sb
from tools import sweep

FAMILY = "mhc_pre_big_fuse"
CONFIG = f"configs/{FAMILY}.yaml"
REAL = Path(f"candidates/{FAMILY}/recorded/h200-sweep.json.xz")


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG)


@pytest.fixture(scope="module")
def real():
    return sweepfile.load(REAL)


@pytest.fixture(scope="module")
def order(cfg, real):
    n_product, full = sweep.valid_order(cfg.family, cfg.geometries, 0)
    keys = [g.key for g in full]
    # The recorded sweep was made in this order: the partition below is the one --shard makes.
    assert keys == list(real["genomes"])
    return n_product, keys


def shards_of(data, order, count):
    """``data`` (an unsharded sweep) split as ``--shard I/count`` would have swept it."""
    n_product, keys = order
    pos = {k: j for j, k in enumerate(keys)}
    out = []
    for i in range(1, count + 1):
        d = copy.deepcopy({k: v for k, v in data.items() if k != "genomes"})
        d.update(
            seed=0,
            shard={"index": i, "count": count},
            space={"knobs": {}, "product": n_product, "valid": len(keys), "order": keys},
        )
        d["genomes"] = {k: copy.deepcopy(e) for k, e in data["genomes"].items() if sweep.in_shard(pos[k], i, count)}
        d["shard"]["genomes"] = len(d["genomes"])
        out.append((f"s{i}.json.xz", d))
    return out


def write(path: Path, data) -> Path:
    return sweepfile.save(path, data)


def backend_on(monkeypatch, cfg, path: Path) -> RecordedBackend:
    d = sweepfile.load(path)
    d["_path"] = str(path)
    monkeypatch.setattr(recorded, "load_sweeps", lambda family: [d])
    return RecordedBackend(cfg.family, cfg.geometries)


def served(be: RecordedBackend, cfg, keys):
    """What the recorded backend serves for these genomes: checks, and times against the baseline."""
    base = be.load(None, cfg.family.baseline())
    out = {}
    for k in keys:
        g = Genome.from_key(k)
        loaded = be.load(None, g)
        checks = [(c.geometry, c.seed, c.output, c.hashes, c.rel_err) for c in be.correctness(loaded).checks]
        times = {geo.name: be.measure([("g", loaded), ("b", base)], geo, 10).times_us for geo in cfg.geometries}
        out[k] = (checks, times)
    return out


# --- the partition ---------------------------------------------------------------------------------------
def test_shards_partition_the_seeded_order():
    for count in (1, 2, 3, 7):
        owners = [[i for i in range(1, count + 1) if sweep.in_shard(j, i, count)] for j in range(100)]
        assert owners[0] == list(range(1, count + 1))  # the baseline: in every shard
        assert all(len(o) == 1 for o in owners[1:])
    assert sweep.parse_shard("2/3") == (2, 3)
    for bad in ("0/2", "3/2", "2", "a/b"):
        with pytest.raises(ValueError, match="--shard"):
            sweep.parse_shard(bad)


# --- merging shards made from the recorded sweep ------------------------------------------------------------
def test_merge_of_the_partitioned_real_sweep_is_the_sweep(real, order, cfg, tmp_path, monkeypatch):
    merged = ms.merge(shards_of(real, order, 3))
    assert merged["stopped"] == "complete" and merged["merged"]["missing"] == []
    assert merged["genomes"] == real["genomes"]
    assert list(merged["genomes"]) == list(real["genomes"])  # in the seeded order, as sweep.py writes them
    assert [s["scale"] for s in merged["merged"]["shards"]] == [{g["name"]: 1.0 for g in real["geometries"]}] * 3
    for k in ("baseline_key", "baseline_hashes", "baseline_errors", "aa", "launches", "geometries", "rounds"):
        assert merged[k] == real[k]
    path = write(tmp_path / "merged.json.xz", merged)
    assert sb.load_space(FAMILY, path).scores == sb.load_space(FAMILY, REAL).scores
    keys = list(real["genomes"])[::97]
    assert served(backend_on(monkeypatch, cfg, path), cfg, keys) == served(
        backend_on(monkeypatch, cfg, REAL), cfg, keys
    )


def test_a_slower_shard_is_scaled_to_the_reference(real, order, cfg, tmp_path, monkeypatch):
    """Shard 2 on a GPU 3% slower: each genome stays relative to its own run's baseline."""
    shards = shards_of(real, order, 2)
    for e in shards[1][1]["genomes"].values():
        for field in ("t", "b"):
            e[field] = {n: [x * 1.03 for x in v] for n, v in e[field].items()}
    merged = ms.merge(shards)
    scale = merged["merged"]["shards"][1]["scale"]
    assert all(v == pytest.approx(1 / 1.03) for v in scale.values())
    assert merged["merged"]["shards"][1]["baseline_median_us"]["T4096_H4096"] == pytest.approx(
        1.03 * merged["merged"]["shards"][0]["baseline_median_us"]["T4096_H4096"]
    )
    path = write(tmp_path / "merged.json.xz", merged)
    got, want = sb.load_space(FAMILY, path).scores, sb.load_space(FAMILY, REAL).scores
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert (got[k] is None) == (v is None) and (v is None or got[k] == pytest.approx(v, rel=1e-5)), k
    # Without the scale, shard 2's genomes would all look 3% slower to search_bench's objective.
    keys = list(real["genomes"])[1:40]
    a, b = served(backend_on(monkeypatch, cfg, path), cfg, keys), served(backend_on(monkeypatch, cfg, REAL), cfg, keys)
    for k in keys:
        assert a[k][0] == b[k][0]
        for geo, times in b[k][1].items():
            for label, xs in times.items():
                assert a[k][1][geo][label] == pytest.approx(xs, rel=1e-5)


def test_identical_sass_across_shards_is_linked_to_the_first_in_order(real, order):
    keys = order[1]
    x, y, z = keys[3], keys[5], keys[8]  # shards of 3: x in 3/3, y and z in 2/3 (x comes first in the order)
    assert [next(i for i in (1, 2, 3) if sweep.in_shard(j, i, 3)) for j in (3, 5, 8)] == [3, 2, 2]
    sx = real["genomes"][x]["sass"]
    # The unsharded sweep: y and z have x's machine code, measured only once (x comes first).
    unsplit = copy.deepcopy(real)
    unsplit["genomes"][y] = {"same_as": x, "sass": sx}
    unsplit["genomes"][z] = {"same_as": x, "sass": sx}
    shards = shards_of(real, order, 3)
    s2 = shards[1][1]["genomes"]
    s2[y]["sass"] = sx  # shard 2 never saw x: it measured y, and z is y's twin there
    s2[z] = {"same_as": y, "sass": sx}
    merged = ms.merge(shards)
    assert merged["genomes"] == unsplit["genomes"]
    assert merged["merged"]["identical_sass_measured_twice"]["pairs_x_geometries"] == len(real["geometries"])


def test_the_same_code_with_another_launch_is_kept_and_the_same_variant_linked(real, order):
    """Shards that record launch digests (tools/sweep.py from 2026-12-07): across shards, genomes are linked by
    (machine code, launch); the same machine code launched otherwise is a variant of its own, kept measured."""
    keys = order[1]
    x, y, z = keys[3], keys[5], keys[8]  # x in shard 3/3, y and z in 2/3
    shards = shards_of(real, order, 3)
    sx = real["genomes"][x]["sass"]
    shards[2][1]["genomes"][x]["launch"] = "L1"
    s2 = shards[1][1]["genomes"]
    s2[y].update(sass=sx, launch="L2")  # x's code, another launch: measured by itself
    s2[z].update(sass=sx, launch="L1")  # x's code and launch: x's twin, measured in another shard
    merged = ms.merge(shards)["genomes"]
    assert merged[z] == {"same_as": x, "sass": sx, "launch": "L1"}
    assert "t" in merged[y] and "same_as" not in merged[y] and "t" in merged[x]


# --- refusals ------------------------------------------------------------------------------------------------
def _one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


def test_overlapping_missing_and_mismatched_shards_are_refused(real, order):
    s1, s2, s3 = shards_of(real, order, 3)
    with pytest.raises(ms.MergeError, match=r"s1\.json\.xz and s1\.json\.xz are both shard 1/3") as e:
        ms.merge([s1, s2, s3, s1])
    _one_line(e)
    with pytest.raises(
        ms.MergeError,
        match=r"incomplete: 384 of 1152 valid genomes not recorded \(shard 2/3 not "
        r"given\); pass --allow-partial",
    ) as e:
        ms.merge([s1, s3])
    _one_line(e)
    part = ms.merge([s1, s3], allow_partial=True)
    assert part["stopped"].startswith("partial merge: 384 of 1152 valid genomes not recorded")
    assert set(part["merged"]["missing"]) == set(s2[1]["genomes"]) - {real["baseline_key"]}
    # A shard of another partition overlaps the others: refused.
    whole = shards_of(real, order, 1)[0]
    with pytest.raises(ms.MergeError, match="not shards of one partition") as e:
        ms.merge([s1, ("whole.json.xz", whole[1])])
    _one_line(e)
    # A genome filed under the wrong shard.
    bad = copy.deepcopy(s2)
    stray = next(k for k in s3[1]["genomes"] if k != real["baseline_key"])
    bad[1]["genomes"][stray] = s3[1]["genomes"][stray]
    with pytest.raises(ms.MergeError, match=r"s2\.json\.xz: genome .* belongs to another shard than 2/3") as e:
        ms.merge([s1, bad, s3])
    _one_line(e)
    for field, value, what in [
        ("rounds", 8, r"rounds differs \(10 vs 8\)"),
        ("seed", 1, "seed differs"),
        ("family", "fp4_matvec", "family differs"),
        ("seeds", 2, "seeds differs"),
    ]:
        other = copy.deepcopy(s2)
        other[1][field] = value
        with pytest.raises(ms.MergeError, match=f"s2.json.xz and s1.json.xz are not shards of one sweep: {what}") as e:
            ms.merge([s1, other, s3])
        _one_line(e)
    other = copy.deepcopy(s2)
    other[1]["space"]["order"] = list(reversed(other[1]["space"]["order"]))
    with pytest.raises(ms.MergeError, match="seeded order differ"):
        ms.merge([s1, other, s3])
    other = copy.deepcopy(s2)
    k = next(iter(other[1]["baseline_hashes"]))
    other[1]["baseline_hashes"][k] = "0" * 16
    with pytest.raises(
        ms.MergeError,
        match=r"the baseline's outputs differ between s1.json.xz and s2.json.xz "
        r"\(1 of 27 hashes\)",
    ):
        ms.merge([s1, other, s3])
    other = copy.deepcopy(s2)
    other[1]["device"] = dict(other[1]["device"], name="NVIDIA H100 80GB HBM3")
    with pytest.raises(ms.MergeError, match="different GPU models"):
        ms.merge([s1, other, s3])
    with pytest.raises(ms.MergeError, match="not a shard file"):
        ms.merge([("old.json.xz", real)])
    with pytest.raises(ms.MergeError, match="already a merge"):
        ms.merge([("m.json.xz", ms.merge([s1, s2, s3]))])


def test_cli_writes_one_file_or_one_error_line(real, order, tmp_path, capsys):
    paths = [str(write(tmp_path / n, d)) for n, d in shards_of(real, order, 2)]
    out = tmp_path / "m.json.xz"
    assert ms.main([*paths, "--out", str(out)]) == 0
    assert "merged: 1152 of 1152 valid genomes; complete" in capsys.readouterr().out
    assert ms.load(out)["genomes"] == real["genomes"]
    assert ms.main([paths[0], "--out", str(tmp_path / "p.json.xz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("merge_sweeps: error: incomplete: 575 of 1152") and err.count("\n") == 1
    assert ms.main([paths[0], "--out", str(tmp_path / "p.json.xz"), "--allow-partial"]) == 0
    assert ms.load(tmp_path / "p.json.xz")["stopped"].startswith("partial merge")


# --- tools/sweep.py itself, on a stand-in GPU that serves the recorded sweep -----------------------------------
class _Pool:
    """In-process stand-in for the compile pool."""

    compiled: list[str] = []

    def __init__(self, jobs, initializer, initargs):
        initializer(*initargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, keys, chunksize=1):
        keys = list(keys)
        _Pool.compiled.extend(keys)
        return map(fn, keys)


@pytest.fixture()
def fake_gpu(monkeypatch, real):
    """tools/sweep.py runs against the recorded sweep: SASS digests and measurements are the recorded ones
    (``twins`` gives a genome another's digest; ``slow`` multiplies every time by a factor, a slower GPU)."""
    state = SimpleNamespace(twins={}, slow=1.0, clock=0.0, tick=0.0)

    class Builder:
        def __init__(self, fam, geos, arch="auto"):
            self.arch = "sm_90"

        @classmethod
        def for_config(cls, cfg, arch=None, geometries=None):
            return cls(cfg.family, geometries or cfg.geometries, arch or "auto")

        def build(self, g):
            k = Genome(g).key
            return SimpleNamespace(genome_key=k, sass_sha256=real["genomes"][state.twins.get(k, k)]["sass"])

    class Gpu(RecordedBackend):
        def __init__(self, fam, geos, builder, *, seeds, runs, batch_ms, nvml=None, pdl=False):
            super().__init__(fam, geos, seeds=seeds, runs=runs)

        def measure(self, parts, g, rounds, launches=None, stop=None):
            s = super().measure(parts, g, rounds, launches, stop)
            s.times_us = {k: [x * state.slow for x in v] for k, v in s.times_us.items()}
            return s

    def monotonic():
        state.clock += state.tick
        return state.clock

    monkeypatch.setattr(sweep, "Builder", Builder)
    monkeypatch.setattr(sweep, "cf", SimpleNamespace(ProcessPoolExecutor=_Pool))
    monkeypatch.setattr(sweep, "time", SimpleNamespace(monotonic=monotonic))
    monkeypatch.setattr(harness.gpu, "GpuBackend", Gpu)
    return state


def run_sweep(monkeypatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["tools/sweep.py", CONFIG, "--peer", "off", "--jobs", "1", *args])
    return sweep.main()


def test_sweep_shards_merge_to_the_unsharded_sweep(fake_gpu, monkeypatch, tmp_path, order, real, cfg):
    keys = order[1]
    # identical code and launch (the same variant), across shards: 6 in shard 3/3, 32 and 44 in 2/3; 1 in 1/3, 60 in 3/3
    fake_gpu.twins = {keys[32]: keys[6], keys[44]: keys[6], keys[60]: keys[1]}
    fake_gpu.twins[keys[5]] = keys[3]  # the same code, another launch (block, h_split): a variant of its own
    assert run_sweep(monkeypatch, "--out", str(tmp_path / "all.json.xz")) == 0
    whole = ms.load(tmp_path / "all.json.xz")
    assert whole["shard"] == {"index": 1, "count": 1, "genomes": 1152} and whole["stopped"] == "complete"
    assert whole["space"]["order"] == keys and whole["space"]["product"] == 1152 and whole["seed"] == 0
    assert {k: e["same_as"] for k, e in whole["genomes"].items() if "same_as" in e} == {
        keys[32]: keys[6],
        keys[44]: keys[6],
        keys[60]: keys[1],
    }
    assert "t" in whole["genomes"][keys[5]] and whole["genomes"][keys[5]]["sass"] == whole["genomes"][keys[3]]["sass"]
    timed = [e for e in whole["genomes"].values() if "t" in e]
    assert timed and all(e["n"].keys() == e["t"].keys() for e in timed)  # each genome's own launches a graph
    paths = []
    for i in (1, 2, 3):
        fake_gpu.slow = 1.0 if i != 2 else 1.02  # shard 2 on a slower GPU
        paths.append(str(tmp_path / f"s{i}.json.xz"))
        assert run_sweep(monkeypatch, "--shard", f"{i}/3", "--out", paths[-1]) == 0
        d = ms.load(paths[-1])
        assert d["shard"] == {"index": i, "count": 3, "genomes": 1 + 1151 // 3 + (i <= 1151 % 3)}
        assert len(d["genomes"]) == d["shard"]["genomes"]
    assert ms.main([*paths, "--out", str(tmp_path / "m.json.xz")]) == 0
    merged = ms.load(tmp_path / "m.json.xz")
    assert merged["stopped"] == "complete" and list(merged["genomes"]) == list(whole["genomes"])
    for k, e in whole["genomes"].items():
        m = merged["genomes"][k]
        assert m.keys() == e.keys() and m.get("same_as") == e.get("same_as") and m.get("checks") == e.get("checks")
        for field in ("t", "b"):
            for n, xs in e.get(field, {}).items():
                assert m[field][n] == pytest.approx(xs, rel=1e-5, abs=1e-4), (k, field, n)
    assert [s["scale"]["T4096_H4096"] for s in merged["merged"]["shards"]] == pytest.approx([1.0, 1 / 1.02, 1.0])
    twice = merged["merged"]["identical_sass_measured_twice"]
    assert twice["pairs_x_geometries"] == 2 * 3  # keys[32] and keys[60] were measured in their own shards too
    a, b = sb.load_space(FAMILY, tmp_path / "m.json.xz").scores, sb.load_space(FAMILY, tmp_path / "all.json.xz").scores
    assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-5) for k in b if b[k] is not None)
    assert [k for k in b if b[k] is None] == [k for k in a if a[k] is None]


def test_sweep_shard_with_compile_only_and_limit(fake_gpu, monkeypatch, tmp_path, order):
    keys = order[1]
    _Pool.compiled = []
    assert run_sweep(monkeypatch, "--shard", "2/4", "--compile-only") == 0
    assert _Pool.compiled == [k for j, k in enumerate(keys) if sweep.in_shard(j, 2, 4)]
    # --limit-s: the clock advances 1 s per reading; the baseline is measured even past the limit.
    fake_gpu.tick = 1.0
    out = tmp_path / "s.json.xz"
    assert run_sweep(monkeypatch, "--shard", "2/4", "--limit-s", "0", "--out", str(out)) == 0
    d = ms.load(out)
    assert list(d["genomes"]) == [keys[0]] and d["stopped"] == "time limit after 1 of 289 genomes"
    assert run_sweep(monkeypatch, "--shard", "1/4", "--limit-s", "1e9", "--out", str(tmp_path / "s1.json.xz")) == 0
    fake_gpu.clock = 0.0
    assert run_sweep(monkeypatch, "--shard", "3/4", "--limit-s", "30", "--out", str(tmp_path / "s3.json.xz")) == 0
    s3 = ms.load(tmp_path / "s3.json.xz")
    n3 = len(s3["genomes"])
    assert s3["stopped"] == f"time limit after {n3} of 289 genomes" and 1 < n3 < 289
    files = [(p.name, ms.load(p)) for p in (tmp_path / "s1.json.xz", out, tmp_path / "s3.json.xz")]
    with pytest.raises(
        ms.MergeError,
        match=r"shard 4/4 not given; shard 2/4 stopped: time limit after 1 of 289 "
        r"genomes; shard 3/4 stopped: time limit after",
    ):
        ms.merge(files)
    part = ms.merge(files, allow_partial=True)
    assert len(part["merged"]["missing"]) == 1151 - 288 - (n3 - 1)
    assert part["stopped"].startswith(f"partial merge: {1151 - 288 - (n3 - 1)} of 1152 valid genomes not recorded")


def test_sweep_resume_completes_a_time_limited_sweep(fake_gpu, monkeypatch, tmp_path, order, real, cfg):
    """--resume: a sweep stopped by its time limit, continued on a slower GPU, is the whole sweep: the new part's
    genomes only (and the baseline again, for the scale), its times scaled to the first run's baseline, code the
    first run measured linked as same_as, and harness/recorded.py and search_bench read it as the unsharded one."""
    keys = order[1]
    whole = tmp_path / "all.json.xz"
    fake_gpu.twins = {keys[707]: keys[3]}  # in the second part, the same code and launch as a genome of the first
    assert run_sweep(monkeypatch, "--out", str(whole)) == 0
    fake_gpu.tick = 1.0  # one second per clock reading: the first run stops early
    first = tmp_path / "first.json.xz"
    assert run_sweep(monkeypatch, "--limit-s", "40", "--out", str(first)) == 0
    f = ms.load(first)
    n1 = len(f["genomes"])
    assert f["stopped"] == f"time limit after {n1} of 1152 genomes" and 1 < n1 < 700
    fake_gpu.tick, fake_gpu.slow = 0.0, 1.03
    _Pool.compiled = []
    out = tmp_path / "resumed.json.xz"
    assert run_sweep(monkeypatch, "--resume", str(first), "--out", str(out)) == 0
    assert _Pool.compiled == [keys[0]] + keys[n1:]  # the baseline again, then only what the first run lacks
    r = ms.load(out)
    w = ms.load(whole)
    assert r["stopped"] == "complete" and list(r["genomes"]) == list(w["genomes"]) and r["merged"]["missing"] == []
    assert [s["stopped"] for s in r["merged"]["shards"]] == [f["stopped"], "complete"]
    assert r["merged"]["shards"][1]["scale"]["T4096_H4096"] == pytest.approx(1 / 1.03)
    assert r["genomes"][keys[707]] == {"same_as": keys[3], **{k: w["genomes"][keys[3]][k] for k in ("sass", "launch")}}
    for k, e in w["genomes"].items():
        if k == keys[707]:
            continue
        m = r["genomes"][k]
        assert m.get("same_as") == e.get("same_as") and m.get("checks") == e.get("checks"), k
        for n, xs in e.get("t", {}).items():
            assert m["t"][n] == pytest.approx(xs, rel=1e-4, abs=1e-3), k
    a, b = sb.load_space(FAMILY, out).scores, sb.load_space(FAMILY, whole).scores
    assert all(a[k] == pytest.approx(b[k], rel=1e-4) for k in b if b[k] is not None and k != keys[707])
    # another sweep's file, or a continuation that measured what the first held: refused with the reason
    other = copy.deepcopy(f)
    other["created"] = "2000-01-01T00:00:00+00:00"
    with pytest.raises(ms.MergeError, match="does not continue"):
        ms.resume(("other", other), ("cont", {**f, "resumes": f["created"], "shard": {"index": 1, "count": 1}}))
    dup = {**copy.deepcopy(f), "resumes": f["created"]}
    with pytest.raises(ms.MergeError, match="holds already"):
        ms.resume((str(first), f), ("cont", dup))


def test_sweep_resume_redo_measures_the_matching_genomes_again(fake_gpu, monkeypatch, tmp_path, order):
    """--resume PREV --redo KNOB=VALUE: a complete sweep whose genomes with that value changed code is measured
    again for exactly those (and the baseline, for the scale); the rest of PREV is kept as it was."""
    keys = order[1]
    whole = tmp_path / "all.json.xz"
    assert run_sweep(monkeypatch, "--out", str(whole)) == 0
    w = ms.load(whole)
    match = [k for k in keys[1:] if Genome.from_key(k)["meta"] == "slice" and Genome.from_key(k)["vec"] == 16]
    assert 0 < len(match) < len(keys) - 1
    fake_gpu.slow = 1.5  # their new code: 1.5x slower on this GPU, and the baseline is measured again at 1.5x
    _Pool.compiled = []
    out = tmp_path / "redone.json.xz"
    assert run_sweep(monkeypatch, "--resume", str(whole), "--redo", "meta=slice,vec=16", "--out", str(out)) == 0
    assert _Pool.compiled == [keys[0]] + match
    r = ms.load(out)
    assert r["stopped"] == "complete" and set(r["genomes"]) == set(w["genomes"]) and r["merged"]["missing"] == []
    for k in keys:
        assert ("same_as" in r["genomes"][k]) == ("same_as" in w["genomes"][k]), k
    # the re-done file is a merge; doing it again (another change to the same genomes) joins onto it as it stands
    _Pool.compiled = []
    again = tmp_path / "again.json.xz"
    assert run_sweep(monkeypatch, "--resume", str(out), "--redo", "meta=slice,vec=16", "--out", str(again)) == 0
    assert _Pool.compiled == [keys[0]] + match
    a = ms.load(again)
    assert a["stopped"] == "complete" and set(a["genomes"]) == set(w["genomes"]) and a["merged"]["missing"] == []
    assert a["merged"]["shards"][0]["earlier_merge"]["shards"][1]["stopped"] == "complete"
    kept = next(k for k in keys[1:] if k not in match and "t" in w["genomes"][k])
    assert a["genomes"][kept]["t"] == r["genomes"][kept]["t"]  # untouched genomes keep their times
    with pytest.raises(SystemExit):
        run_sweep(monkeypatch, "--resume", str(whole), "--redo", "nope=1", "--out", str(out))
    with pytest.raises(SystemExit):
        run_sweep(monkeypatch, "--redo", "meta=slice", "--out", str(out))


def test_a_sweep_from_before_launch_was_recorded_merges_with_a_plain_one_not_a_pdl_one():
    """Files before 2026-12-02 say nothing of their launches: they timed plainly (a resume of one must not be
    refused after its GPU run for `launch: None vs 'plain'`)."""
    from tools.merge_sweeps import MergeError, _check_same

    old = {"space": {"knobs": {}, "order": []}, "device": {"name": "H200"}, "baseline_hashes": {}}
    plain, pdl = {**old, "launch": "plain"}, {**old, "launch": "pdl"}
    _check_same([("old", old), ("new", plain)])
    with pytest.raises(MergeError, match="launch differs"):
        _check_same([("old", old), ("new", pdl)])


def test_sweep_of_a_sub_space_and_the_campaign_on_it(fake_gpu, monkeypatch, tmp_path, real, cfg, capsys):
    """--knobs: the sweep measures only the sub-space (its space says which values), and the recorded backend on
    that file narrows a campaign to them; a bad --knobs is one error line before anything is measured."""
    out = tmp_path / "sub.json.xz"
    _Pool.compiled = []
    assert run_sweep(monkeypatch, "--knobs", "{block: [256, 512], h_split: [1], unroll: [1]}", "--out", str(out)) == 0
    d = ms.load(out)
    assert d["space"]["knobs"]["block"] == [256, 512] and d["space"]["knobs"]["h_split"] == [1]
    assert d["space"]["product"] == 2 * 2 * 2 * 2 * 2 * 2 == len(d["genomes"]) == len(_Pool.compiled)
    assert all(Genome.from_key(k)["block"] in (256, 512) and Genome.from_key(k)["unroll"] == 1 for k in d["genomes"])
    assert d["latency_floor"]["unmeasured"]  # the stand-in GPU has none: said, not invented
    be = backend_on(monkeypatch, cfg, out)
    narrowed, lines = recorded_narrow(cfg, be.knob_space())
    assert lines == ["block: 256, 512 of 128, 256, 512", "unroll: 1 of 1, 2, 4", "h_split: 1 of 1, 2, 4, 8"]
    assert {g.key for g in sweep.valid_order(narrowed.family, narrowed.geometries, 0)[1]} == set(d["genomes"])
    bad_knobs = (("{block: [96]}", "--knobs.block: 96 is not a value"), ("[1, 2]", "expected a mapping"))
    for bad, says in (*bad_knobs, ("{1: [1], nope: [2]}", "expected a mapping of knob names")):
        with pytest.raises(SystemExit):
            run_sweep(monkeypatch, "--knobs", bad, "--out", str(tmp_path / "x.json.xz"))
        assert says in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "x.json.xz").exists()
