"""The decode knobs (mhc_pre_decode, issue 33) on the CPU: mhc_pre_big_fuse's machine code is unchanged by them,
every new knob value compiles at sm_90 and passes the static gate, and the decode family is what its config says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("cupy")  # NVRTC comes with CuPy; no GPU needed

from evo.config import load_config  # noqa: E402
from evo.core.family import Geometry, load_family  # noqa: E402
from gates.static import static_gate  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.recorded import load_sweeps  # noqa: E402
from tools.probes import decode as probe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# kernel.cu as it was before the decode knobs (commit d3ad7e0): the reference for the machine-code identity
BEFORE = (ROOT / "tests" / "data" / "mhc_pre_big_fuse_kernel_before_decode_knobs.cu").read_text()
BIG = load_family("mhc_pre_big_fuse")
CFG = load_config(ROOT / "configs" / "mhc_pre_decode.yaml")
DEC = CFG.family
ARCH = "sm_90"
G_S1 = Geometry("T128_H7168", {"T": 128, "H": 7168, "S": 1, "prenorm": False})
G_S32 = Geometry("T1_H4096_S32", {"T": 1, "H": 4096, "S": 32, "prenorm": False})
G_PRE = Geometry("T64_H4096_pre", {"T": 64, "H": 4096, "S": 1, "prenorm": True})
TUNED = {"meta": "slice", "barrier": "early", "split_reduce": "warp", "block": 128, "h_split": 4}
NEW = [k for k in DEC.knobs if k.name not in {b.name for b in BIG.knobs}]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"meta": "slice", "barrier": "early", "block": 128, "h_split": 2, "vec": 8},
        {"meta": "slice", "split_reduce": "warp", "unroll": 4, "warp0_stream": True, "block": 512},
        {"barrier": "early", "unroll": 2, "h_split": 8},
    ],
)
def test_big_fuse_machine_code_is_what_it_was_before_the_decode_knobs(changes):
    b = Builder(BIG, [G_S1, G_S32, G_PRE], ARCH)
    g = BIG.genome(changes)
    now, before = b.build(g), b.build(g, BEFORE)
    for key, m in now.modules.items():
        assert m.sass_sha256 == before.modules[key].sass_sha256, (changes, key)


def test_big_fuse_keeps_its_knob_space_and_its_recorded_sweep():
    assert [k.name for k in BIG.knobs] == [
        "block", "meta", "barrier", "split_reduce", "vec", "unroll", "warp0_stream", "h_split",
    ]  # fmt: skip
    sweep = load_sweeps(BIG)[0]
    assert set(json.loads(sweep["baseline_key"])) == {k.name for k in BIG.knobs}
    assert not BIG.pdl_safe(BIG.baseline())


def test_decode_family_is_big_fuse_plus_the_decode_knobs():
    assert DEC.name == "mhc_pre_decode" and DEC.kernel_path == BIG.kernel_path and DEC.source() == BIG.source()
    assert [k.name for k in DEC.knobs][: len(BIG.knobs)] == [k.name for k in BIG.knobs]
    assert {k.name for k in NEW} == {
        "split_lanes",
        "sinkhorn",
        "fast_math",
        "early_loads",
        "pre_per_warp",
        "pdl_overlap",
    }
    assert [k.name for k in NEW if not k.exact] == ["fast_math"]
    assert DEC.knob("h_split").values[-1] == 16 and DEC.knob("block").values[0] == 64
    base = DEC.baseline()
    assert all(DEC.inexact_knobs(base, g) == [] for g in CFG.geometries)
    assert all(DEC.inexact_knobs(base.replace(fast_math=True), g) == ["fast_math"] for g in CFG.geometries)
    assert DEC.pdl_safe(base.replace(pdl_overlap=True)) and not DEC.pdl_safe(base)
    for title in DEC.faults:  # the fault suite still applies to the kernel
        assert DEC.faulty_source(title) != DEC.source(), title


def test_decode_config_weights_decode_shapes_and_watches_the_large_ones():
    w = {g.name: g.weight for g in CFG.geometries}
    assert {n for n, x in w.items() if x == 0} == {"T4096_H4096", "T4096_H7168"}
    decode = {(g["T"], g["H"], g["S"]) for g in CFG.geometries if g.weight > 0}
    assert decode == {(1, h, s) for h in (4096, 7168) for s in (1, 32)} | {
        (t, h, 1) for t in (8, 32, 128) for h in (4096, 7168)
    }
    assert CFG.gates.correctness.mode == "tolerance"  # fast_math is judged against float64


def test_decode_defaults_build_the_big_fuse_baseline():
    geos = [G_S1, G_S32]
    assert (
        Builder(DEC, geos, ARCH).build(DEC.baseline()).sass_sha256
        == Builder(BIG, geos, ARCH).build(BIG.baseline()).sass_sha256
    )


@pytest.mark.parametrize("start", ["baseline", "tuned"])
def test_every_new_knob_value_compiles_and_passes_the_static_gate(start):
    geos = [G_S1, G_S32]
    plain, pdl = Builder(DEC, geos, ARCH), Builder(DEC, geos, ARCH, defines={"EVO_PDL": 1})
    base = plain.build(DEC.baseline())
    ref = DEC.genome({} if start == "baseline" else TUNED)
    ref_sass = plain.build(ref).sass_sha256
    for k in NEW + [DEC.knob("block"), DEC.knob("h_split")]:
        for v in k.values:
            if v == ref[k.name]:
                continue
            g = ref.replace(**{k.name: v})
            for b in (plain, pdl) if k.name == "pdl_overlap" else (plain,):
                built = b.build(g)
                res = {key: m.resources for key, m in built.modules.items()}
                verdict = static_gate(res, {key: m.resources for key, m in base.modules.items()}, 255, False)
                assert verdict.ok, (start, k.name, v, verdict.reason)
                assert all(r.spills == 0 for r in res.values()), (start, k.name, v)
                if k.name == "pdl_overlap":  # griddepcontrol only where the campaign launches with PDL
                    assert (built.sass_sha256 == ref_sass) == (b is plain), (start, v)
                else:
                    assert built.sass_sha256 != ref_sass, (start, k.name, v)


def test_decode_probe_genomes_are_valid_and_its_empty_kernel_compiles():
    for name, ch in probe.GENOMES.items():
        assert DEC.check(DEC.genome(ch), CFG.geometries) is None, name
    for defines in ({}, {"EVO_PDL": 1}):
        m = Builder(DEC, [G_S1], ARCH, defines=defines).build(DEC.baseline(), base_source=probe.EMPTY_SOURCE)
        r = next(iter(m.modules.values())).resources
        assert r.spills == 0 and r.stack_frame == 0 and r.registers < 32


def test_decode_probe_summaries():
    class C:  # an OutputCheck's fields the summaries read
        def __init__(self, geometry, output, hashes, rel_err, seed=0):
            self.geometry, self.output, self.hashes, self.rel_err, self.seed = geometry, output, hashes, rel_err, seed

    base_h = {"a/0/x": "h1", "b/0/x": "h2"}
    checks = [C("a", "x", ["h1", "h1"], 2e-7), C("b", "x", ["h2", "other"], 6e-7)]
    assert probe.bits_kept(checks, base_h) == {"a": True, "b": False}
    assert probe.error_ratios(checks, {"a/0/x": 1e-7, "b/0/x": 2e-7}) == {"x": pytest.approx(3.0)}
    result = {
        "genomes": {"g": {"timed": True, "pdl": True}, "h": {"timed": False, "pdl": False}},
        "timings": {"T1": {"floor_plain": 2.0, "floor_pdl": 1.0, "baseline": 8.0, "g": 4.0}},
    }
    table = probe.summary_table(result)
    assert "| T1 | 2.00 / 1.00 | 8.00 (4.0F) | 4.00 (2.00x, 4.0F) |" in table and "| h |" not in table


def test_decode_reference_traces_under_torch_compile():
    """The peer (torch.compile of the reference) imports the family's module by name: the H200 campaign at 3c7ccb1
    got "No module named 'evo_family_mhc_pre_big_fuse_for_decode'" at every geometry."""
    torch = pytest.importorskip("torch")
    g = next(g for g in CFG.geometries if g.name == "T1_H4096")
    inp = DEC.make_inputs(g, 0, "cpu")
    out = torch.compile(lambda: DEC.reference(inp, g, torch.float32), backend="eager")()
    assert set(out) == {"post_mix", "comb_mix", "layer_input"}
