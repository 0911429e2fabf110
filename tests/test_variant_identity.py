"""A variant is its machine code and its launch (issue 40, item 2): a knob that changes only the block size at
launch (as engines choose it) is measured, never rejected as "identical SASS"; two genomes with the same code and
the same launch are one variant; `evo check` counts variants by (code, launch) and names a knob that changes
neither. Compiled with NVRTC on the CPU; measured on the recorded backend from a small sweep written here."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from evo.check import run_check
from evo.config import load_config
from evo.core.family import Geometry, Launch
from evo.core.genome import Genome
from evo.core.records import Attempt, Code, Timing, Verdict
from evo.core.variant import LaunchError, Variant, launch_digest, twin, variant_key
from evo.loop.campaign import Campaign
from gates.judge import Evidence
from gates.pipeline.identical_sass import identical_sass
from harness import sweepfile
from harness.recorded import NotRecorded, RecordedBackend

# A kernel that takes its block size at launch (blockDim.x): every value of `block` compiles to the same machine
# code. `spare` is passed as EVO_SPARE and read by nothing: it changes neither the code nor the launch.
KERNEL = """\
extern "C" __global__ void twice(const float* __restrict__ x, float* __restrict__ y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0f * x[i];
}
"""

FAMILY = """\
import torch

from evo.core.family import Family, GeometryParam, Knob, Launch, OutputSpec


class Twice(Family):
    def outputs(self, geometry):
        return [OutputSpec("y", "float32", (geometry["n"],))]

    def make_inputs(self, geometry, seed, device):
        gen = torch.Generator().manual_seed(seed)
        return {"x": torch.randn(geometry["n"], generator=gen).to(device)}

    def reference(self, inputs, geometry, dtype=None):
        return {"y": 2.0 * inputs["x"].to(dtype or torch.float64)}

    def block(self, genome, geometry):
        # "engine": the engine's own heuristic, computed per geometry at launch
        if genome["block"] == "engine":
            return 128 if geometry["n"] <= 4096 else 256
        return genome["block"]

    def launch(self, genome, geometry):
        b = self.block(genome, geometry)
        return Launch(((geometry["n"] + b - 1) // b, 1, 1), (b, 1, 1))

    def kernel_args(self, inputs, outputs, geometry):
        return [inputs["x"], outputs["y"], geometry["n"]]

    def arg_types(self):
        return "ppi"

    def bytes_moved(self, geometry):
        return 8 * geometry["n"]


FAMILY = Twice(
    name="twice",
    entry="twice",
    knobs=(Knob("block", ("engine", 64, 128, 256), "engine"), Knob("spare", (0, 1), 0)),
    geometry_params=(GeometryParam("n", int),),
)
"""

GEOS = [{"name": "n1k", "n": 1024}, {"name": "n64k", "n": 65536}]
CONFIG = """\
campaign: ident
family: ./twice
geometries:
  - {name: n1k, n: 1024, weight: 1}
  - {name: n64k, n: 65536, weight: 1}
budget: {attempts: ATTEMPTS}
proposer: {name: random}
gates:
  correctness: {mode: exact, seeds: 3, runs: 2}
  perf: {rounds: 10, aa_rounds: 30, min_gain: 0.01, ceiling_check: 0}
backend: recorded
peer: {torch_compile: off}
seed: 0
storage: sqlite:///DB
"""
ROUNDS = 10
# the time each block size takes (µs, at every geometry): 128 is the fastest, the engine's heuristic the baseline
US = {"engine": 10.0, 64: 10.6, 128: 9.0, 256: 10.3}


def _rounds(us: float, n: int, phase: int = 0) -> list[float]:
    return [round(us * (1 + 0.0004 * (((i + phase) * 7) % 5 - 2)), 4) for i in range(n)]


def _entry(us: float) -> dict:
    checks = [[g["name"], seed, "y", ["=", "="], 0, 0, 0.0, 0.0, "", 0] for g in GEOS for seed in range(3)]
    return {
        "status": "ok",
        "checks": checks,
        "t": {g["name"]: _rounds(us, ROUNDS) for g in GEOS},
        "b": {g["name"]: _rounds(US["engine"], ROUNDS, 1) for g in GEOS},
        "disc": {g["name"]: 0 for g in GEOS},
        "n": {g["name"]: 100 for g in GEOS},
        "recheck": None,
    }


def sweep(genomes: dict[str, dict]) -> dict:
    """A recorded sweep of the family (the format tools/sweep.py writes), holding ``genomes``."""
    base = Genome({"block": "engine", "spare": 0}).key
    return {
        "format": 1,
        "family": "twice",
        "created": "2026-12-08T00:00:00+00:00",
        "stopped": "complete",
        "device": {"name": "test"},
        "copy_ceiling": {"ceiling_tbps": 4.0},
        "geometries": [{"name": g["name"], "params": {"n": g["n"]}, "weight": 1.0} for g in GEOS],
        "seeds": 3,
        "runs": 2,
        "rounds": ROUNDS,
        "aa_rounds": 30,
        "launches": {g["name"]: 100 for g in GEOS},
        "launch": "plain",
        "baseline_key": base,
        "baseline_hashes": {f"{g['name']}/{seed}/y": f"h{g['name']}{seed}" for g in GEOS for seed in range(3)},
        "baseline_errors": {},
        "aa": {g["name"]: {"a": _rounds(10.0, 30), "b": _rounds(10.0, 30, 2), "discarded": 0} for g in GEOS},
        "genomes": genomes,
    }


def every_genome() -> dict[str, dict]:
    """Each genome measured by itself (the data a sweep of every genome would hold)."""
    return {Genome({"block": b, "spare": s}).key: _entry(US[b]) for b, s in itertools.product(US, (0, 1))}


def write_family(tmp_path: Path, attempts: int = 8, genomes: dict[str, dict] | None = None) -> Path:
    fam = tmp_path / "twice"
    (fam / "recorded").mkdir(parents=True)
    (fam / "family.py").write_text(FAMILY)
    (fam / "kernel.cu").write_text(KERNEL)
    sweepfile.save(fam / "recorded" / "h200-sweep.json.xz", sweep(genomes if genomes is not None else every_genome()))
    cfg = tmp_path / "evo.yaml"
    cfg.write_text(CONFIG.replace("ATTEMPTS", str(attempts)).replace("DB", str(tmp_path / "ledger.db")))
    return cfg


# --- the digest and the one rule ----------------------------------------------------------------------------


@pytest.fixture
def fam(tmp_path):
    return load_config(write_family(tmp_path)).family


def test_launch_digest_tells_launches_apart_and_nothing_else(fam):
    geos = [Geometry(g["name"], {"n": g["n"]}) for g in GEOS]
    d = {b: launch_digest(fam, Genome({"block": b, "spare": 0}), geos) for b in US}
    assert len(set(d.values())) == 4  # each block size its own launch ("engine": 128 at n1k, 256 at n64k)
    assert launch_digest(fam, Genome({"block": 64, "spare": 1}), geos) == d[64]  # spare never reaches the launch
    assert launch_digest(fam, Genome({"block": 64, "spare": 0}), geos[::-1]) == d[64]  # the geometries' order
    assert launch_digest(fam, Genome({"block": 128, "spare": 0}), geos[:1]) != d[128]  # which geometries
    # "engine" equals 128 at n1k: one geometry alone cannot tell them apart, both together can
    assert launch_digest(fam, Genome({"block": "engine", "spare": 0}), geos[:1]) == launch_digest(
        fam, Genome({"block": 128, "spare": 0}), geos[:1]
    )
    # PDL counts where the campaign launches with it and the family calls the genome safe
    assert launch_digest(fam, Genome({"block": 64, "spare": 0}), geos, pdl=True) == d[64]  # pdl_safe: False
    fam.pdl_safe = lambda genome: True  # type: ignore[method-assign]
    assert launch_digest(fam, Genome({"block": 64, "spare": 0}), geos, pdl=True) != d[64]


def test_a_launch_that_raises_or_is_no_launch_is_one_line(fam):
    geos = [Geometry("n1k", {"n": 1024})]

    def bad(genome, geometry):
        raise ZeroDivisionError("block\n0")

    fam.launch = bad  # type: ignore[method-assign]
    with pytest.raises(
        LaunchError, match=r'^launch\(\{"block":64,"spare":0\}\) at n1k raised ZeroDivisionError: block 0$'
    ):
        launch_digest(fam, Genome({"block": 64, "spare": 0}), geos)
    fam.launch = lambda genome, geometry: ((1, 1, 1), (64, 1, 1))  # type: ignore[method-assign]
    with pytest.raises(LaunchError, match="gives a tuple, not a Launch"):
        launch_digest(fam, Genome({"block": 64, "spare": 0}), geos)


def test_a_launch_field_added_with_its_default_keeps_every_digest(fam, monkeypatch):
    from dataclasses import dataclass

    import evo.core.variant as variant

    geos = [Geometry("n1k", {"n": 1024})]
    before = launch_digest(fam, Genome({"block": 64, "spare": 0}), geos)

    @dataclass
    class Launch2(Launch):
        cluster: tuple[int, int, int] = (1, 1, 1)

    base_launch = type(fam).launch
    monkeypatch.setattr(variant, "Launch", Launch2)
    fam.launch = lambda g, geo: Launch2(**vars(base_launch(fam, g, geo)))  # type: ignore[method-assign]
    assert launch_digest(fam, Genome({"block": 64, "spare": 0}), geos) == before
    fam.launch = lambda g, geo: Launch2(**vars(base_launch(fam, g, geo)), cluster=(2, 1, 1))  # type: ignore
    assert launch_digest(fam, Genome({"block": 64, "spare": 0}), geos) != before


def test_same_variant_is_code_and_launch_and_old_records_match_by_code():
    assert Variant("s", "L").same(Variant("s", "L"))
    assert not Variant("s", "L").same(Variant("s", "M"))  # same code, another launch: another variant
    assert not Variant("s", "L").same(Variant("t", "L"))
    assert Variant("s", "L").same(Variant("s", ""))  # recorded before launch digests: by its code, as then
    assert not Variant("", "L").same(Variant("", "L"))  # nothing compiled: nothing is the same
    assert twin(Variant("s", "L"), [(Variant("s", "L"), 1), (Variant("s", "M"), 2), (Variant("s", "L"), 3)]) == 3
    assert twin(Variant("s", "L"), [(Variant("s", "M"), 2)]) is None
    assert variant_key("s") == "s" and variant_key("s", "L") == "s+L" != variant_key("s", "M")


def _att(i: int, sass: str, launch: str, timed: bool = True) -> Attempt:
    a = Attempt(i, "c", "f", {"k": i}, f"k{i}", sass_sha256=sass, launch_sha256=launch)
    if timed:
        a.timings = {"g": Timing(1.0, 0.1, 10)}
    return a


def test_the_identity_gate_holds_old_ledgers_by_code_and_new_ones_by_code_and_launch():
    def gate(new: Attempt, recorded: list[Attempt]) -> Verdict | None:
        return identical_sass(Evidence(None, None, new, recorded=recorded))  # type: ignore[arg-type]

    assert gate(_att(9, "s", "M"), [_att(1, "s", "L")]) is None  # another launch: measured
    v = gate(_att(9, "s", "L"), [_att(1, "s", "L"), _att(2, "s", "M")])
    assert v is not None and v.code is Code.STATIC_IDENTICAL_SASS and v.detail == {"attempt": 1}
    assert v.reason.startswith("identical machine code and launch to attempt #1")
    old = Attempt.from_json(
        json.dumps({k: v for k, v in json.loads(_att(3, "s", "").to_json()).items() if k != "launch_sha256"})
    )
    assert old.launch_sha256 == ""  # a ledger written before the field loads
    v = gate(_att(9, "s", "M"), [old])  # resuming an old campaign: its measured code is not measured again
    assert v is not None and v.detail == {"attempt": 3}
    assert gate(_att(9, "s", "L"), [_att(1, "s", "L", timed=False)]) is None  # never measured: no twin
    assert Attempt.from_json(_att(4, "s", "L").to_json()).launch_sha256 == "L"


# --- the campaign on the CPU (NVRTC) and the recorded backend ------------------------------------------------


def test_launch_only_genomes_are_measured_and_true_twins_are_not(tmp_path):
    cfg = load_config(write_family(tmp_path, attempts=8))
    camp = Campaign(cfg, out=lambda s: None, command="pytest")
    summary = camp.run()
    atts = camp.ledger.attempts()
    assert len(atts) == 8 and len({a.sass_sha256 for a in atts}) == 1  # one machine code for all of them
    assert all(a.launch_sha256 for a in atts)
    by_key = {a.genome_key: a for a in atts}
    timed = [a for a in atts if a.timings]
    # every block size measured once, whatever `spare` is: four variants
    assert sorted(str(a.genome["block"]) for a in timed) == sorted(str(b) for b in US)
    twins = [a for a in atts if a.verdict.code is Code.STATIC_IDENTICAL_SASS]
    assert len(twins) == 4 and not any(a.timings for a in twins)
    for a in twins:
        other = by_key[Genome({**a.genome, "spare": 1 - a.genome["spare"]}).key]
        assert a.verdict.detail == {"attempt": other.id} and other.timings
        assert a.launch_sha256 == other.launch_sha256
        assert a.verdict.reason.startswith(f"identical machine code and launch to attempt #{other.id}")
    assert summary.champion is not None and summary.champion.genome["block"] == 128  # the launch-only win


def test_a_launch_that_raises_is_an_error_verdict_and_the_run_goes_on(tmp_path, monkeypatch):
    cfg = load_config(write_family(tmp_path, attempts=8))
    fam = cfg.family
    base_launch = type(fam).launch

    def launch(genome, geometry):
        if genome["block"] == 256 and genome["spare"] == 1:
            raise ValueError("no 256-thread blocks with spare")
        return base_launch(fam, genome, geometry)

    monkeypatch.setattr(fam, "launch", launch)
    camp = Campaign(cfg, out=lambda s: None, command="pytest")
    camp.run()
    atts = camp.ledger.attempts()
    assert len(atts) == 8
    (bad,) = [a for a in atts if a.verdict.code is Code.ERROR_LAUNCH]
    assert bad.genome == {"block": 256, "spare": 1} and not bad.timings
    assert bad.verdict.reason == (
        'launch({"block":256,"spare":1}) at n1k raised ValueError: no 256-thread blocks with spare'
    )


def test_an_old_sweep_linked_by_code_alone_serves_no_other_launch(tmp_path):
    """A sweep from before launch digests linked genomes by their SASS: the link holds for the same launch (spare),
    and is refused, not replayed with another genome's times, where the launches differ (block)."""
    genomes = every_genome()
    base = Genome({"block": "engine", "spare": 0}).key
    for b in (64, 256):  # linked by the (equal) machine code to the baseline, as old sweeps did
        genomes[Genome({"block": b, "spare": 0}).key] = {"same_as": base, "sass": "x"}
    genomes[Genome({"block": "engine", "spare": 1}).key] = {"same_as": base, "sass": "x"}
    cfg = load_config(write_family(tmp_path, genomes=genomes))
    be = RecordedBackend(cfg.family, cfg.geometries)
    rec = be.sweep.data["genomes"]
    assert be._entry(Genome({"block": "engine", "spare": 1}).key) is rec[base]  # the same launch: followed
    with pytest.raises(NotRecorded, match="linked by its machine code alone .* launch differs"):
        be._entry(Genome({"block": 64, "spare": 0}).key)
    rec[Genome({"block": 256, "spare": 0}).key]["launch"] = "y"  # a link a sweep made by (code, launch)
    assert be._entry(Genome({"block": 256, "spare": 0}).key) is rec[base]


# --- evo check ------------------------------------------------------------------------------------------------


def test_evo_check_counts_each_block_value_and_names_the_knob_that_changes_nothing(tmp_path):
    lines: list[str] = []
    ok, final = run_check(write_family(tmp_path), gpu=False, say=lines.append)
    assert ok, final
    assert "4 distinct variants (code x launch; 1 machine code)" in final
    notes = [ln for ln in lines if "note:" in ln]
    assert any("knob spare changes neither the machine code nor the launch" in n for n in notes), lines
    assert not any("knob block" in n for n in notes), lines
