"""examples/fused_add_rmsnorm: an engine-style family outside candidates/ (template knobs, <cuda_bf16.h>).

CPU tests: the family loads from its folder, its faults apply, its reference is the plain float64 math,
its inputs are fresh per seed and never zero, and every valid genome of its knob space compiles with
NVRTC (sm_90, no GPU needed) through a name expression of its template-id, with no spills. The
compile helper below stands in for the harness's template-knob support until that lands.

GPU tests (marker ``gpu``): every genome valid for evo.yaml's geometries against the reference, the
exactness claims of its knobs, and the correctness faults caught.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import string
from pathlib import Path

import pytest

from evo.core.family import Family, Geometry, _load_module

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "examples" / "fused_add_rmsnorm"


def _load():
    mod = _load_module(FOLDER / "family.py", "evo_example_fused_add_rmsnorm")
    fam = mod.FAMILY
    fam.folder = FOLDER
    return mod, fam


MOD, FAM = _load()
KNOBS = [k.name for k in FAM.knobs]
ALL = [dict(zip(KNOBS, v)) for v in itertools.product(*(k.values for k in FAM.knobs))]
VALID = [g for g in ALL if FAM.check(g, []) is None]


def _config():
    import yaml

    return yaml.safe_load((FOLDER / "evo.yaml").read_text())


def _config_geometries() -> list[Geometry]:
    return [Geometry(g["name"], {"T": g["T"], "H": g["H"]}, g["weight"]) for g in _config()["geometries"]]


def template_id(genome) -> str:
    """``FAMILY.entry`` with the genome's values: bools as true/false, ints as ints (the harness's rule)."""
    vals = {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in genome.items()}
    return FAM.entry.format(**vals)


# --- NVRTC, directly (until the harness compiles template-ids itself) -----------------------------


def _nvrtc():
    from cupy.cuda import nvrtc  # a dependency of evo: CI compiles with it, no GPU needed

    return nvrtc


def nvrtc_compile(source: str, expr: str, arch: str = "sm_90") -> tuple[bytes, str, str]:
    """(cubin, ptxas log, lowered name) of one instantiation, named by its template-id."""
    nvrtc = _nvrtc()
    from harness.build import cuda_include_dirs  # the CUDA headers evo's builder uses (toolkit or wheels)

    opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v", "-std=c++17", f"-I{FOLDER}"]
    opts += [f"-I{d}" for d in cuda_include_dirs()]
    opts += [f"-I{d}" for d in FAM.include_dirs] + list(FAM.nvrtc_options)
    prog = nvrtc.createProgram(source, "kernel.cu", [], [])
    try:
        nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            raise AssertionError(f"{expr} does not compile:\n{nvrtc.getProgramLog(prog)}") from None
        lowered = nvrtc.getLoweredName(prog, expr)
        cubin = nvrtc.getCUBIN(prog)  # ptxas runs by now: its report is in the log
        log = nvrtc.getProgramLog(prog).replace("\x00", "")
    finally:
        nvrtc.destroyProgram(prog)
    return cubin, log, lowered


@pytest.fixture(scope="module")
def compiled():
    """Every genome that check() accepts without geometries (a superset of any campaign's), compiled once."""
    src = FAM.source()
    return {template_id(g): nvrtc_compile(src, template_id(g)) for g in VALID}


# --- the family and its files -------------------------------------------------------------------


def test_family_loads_from_its_folder():
    assert isinstance(FAM, Family) and FAM.name == "fused_add_rmsnorm" and FAM.kernel_path.is_file()
    assert FAM.include_dirs == () and FAM.nvrtc_options == ()
    placeholders = {f for _, f, _, _ in string.Formatter().parse(FAM.entry) if f}
    assert placeholders == set(KNOBS), "the template-id names every knob, and nothing else"
    assert all(n == n.lower() for n in KNOBS)
    assert template_id(FAM.baseline()) == "fused_add_rmsnorm<256, 1, 0, Reduce::warp0>"
    assert "engines update in place; this is the out-of-place form" in " ".join(MOD.__doc__.split()).lower()


def test_knobs_defaults_and_exactness():
    for k in FAM.knobs:
        assert k.default in k.values and k.doc
    assert dict(FAM.baseline()) == {"block": 256, "vec": 1, "cache": 0, "reduce": "warp0"}
    assert {k.name: k.exact for k in FAM.knobs} == {"block": False, "vec": False, "cache": True, "reduce": True}
    g = Geometry("g", {"T": 1, "H": 4096})
    assert FAM.inexact_knobs(FAM.baseline(), g) == []
    assert FAM.inexact_knobs(FAM.genome({"cache": 4, "reduce": "all_warps"}), g) == []
    assert FAM.inexact_knobs(FAM.genome({"block": 512, "vec": 8}), g) == ["block", "vec"]


def test_kernel_is_engine_style_and_macro_free():
    src = FAM.source()
    assert "#include <cuda_bf16.h>" in src and "__launch_bounds__(BLOCK)" in src and "__restrict__" in src
    assert "template <int BLOCK, int VEC, int CACHE, Reduce RED>" in src
    code = "\n".join(line.split("//")[0] for line in src.splitlines())  # (the comments may name them)
    assert "EVO_" not in code, "knobs arrive as template arguments, never as the harness's macros"
    for trick in ("__float_as_uint", "__uint_as_float", "0x7fff", "<< 16"):
        assert trick not in src, f"hand-rolled bf16 bits: {trick}"


def test_every_fault_applies_once():
    src = FAM.source()
    labels = {
        "rejected: correctness",
        "rejected: static",
        "rejected: perf",
        "error: compile",
        "error: crash",
        "error: timeout",
    }
    assert len(FAM.faults) >= 6
    for title, f in FAM.faults.items():
        olds = f[0] if isinstance(f[0], (list, tuple)) else [f[0]]
        for old in olds:
            assert src.count(old) == 1, f"{title}: old text found {src.count(old)} times in kernel.cu"
        assert FAM.faulty_source(title) != src
        assert FAM.fault_expectation(title) in labels


def test_config_file():
    cfg = _config()
    assert cfg["campaign"] == "fused_add_rmsnorm" and cfg["family"] == "."
    assert cfg["gates"]["correctness"]["mode"] == "tolerance"
    # auto: on a GPU the GPU, else its recorded H200 sweep (every valid genome)
    assert cfg["backend"] == "auto" and cfg["proposer"]["name"] == "surrogate"
    assert (FOLDER / "recorded" / "h200-sweep.json.xz").is_file()
    assert cfg["budget"] == {"attempts": 150, "minutes": 5}
    geos = _config_geometries()
    assert {(g["T"], g["H"], g.weight) for g in geos} == {(1, 4096, 1), (32, 4096, 1), (128, 7168, 1), (4096, 4096, 0)}
    for g in geos:
        assert FAM.check_geometry(g.params) is None
    assert FAM.check(FAM.baseline(), geos) is None


def test_campaign_runs_on_the_recorded_sweep_without_a_gpu(tmp_path):
    """The recorded backend (what backend: auto picks on a machine without a GPU): every valid genome of the
    config tried, and a champion well ahead of the baseline."""
    from evo.config import load_config
    from evo.loop.campaign import Campaign

    cfg = load_config(FOLDER / "evo.yaml", backend_override="recorded", storage_override=f"sqlite:///{tmp_path}/l.db")
    camp = Campaign(cfg, out=lambda _: None, command="test")
    camp.run()
    atts = camp.ledger.attempts()
    assert len(atts) == 78 and len({a.genome_key for a in atts}) == 78  # the space, exhausted
    champ = camp.ledger.champion()
    assert champ is not None and champ.genome != dict(FAM.baseline()) and (champ.score or 0) > 2.0


def test_config_loads_through_evo_with_the_family_as_a_path():
    from evo.config import load_config

    cfg = load_config(FOLDER / "evo.yaml")  # family: . (the config's own folder)
    assert cfg.family.name == "fused_add_rmsnorm" and len(cfg.geometries) == 4
    assert cfg.family.folder == FOLDER.resolve()


# --- geometry and genome checks -------------------------------------------------------------------


def test_check_geometry():
    assert FAM.check_geometry({"T": 1, "H": 4096}) is None
    assert FAM.check_geometry({"T": 1, "H": 65536}) is None
    assert "multiple of 8" in FAM.check_geometry({"T": 1, "H": 4100})
    assert "over 65536" in FAM.check_geometry({"T": 1, "H": 65544})


def test_invalid_genomes_are_refused_with_a_reason():
    g7168 = [Geometry("T128_H7168", {"T": 128, "H": 7168})]
    why = FAM.check(FAM.genome({"block": 1024, "vec": 8, "cache": 8}), [])
    assert why and "block=1024" in why and "spills" in why
    why = FAM.check(FAM.genome({"block": 256, "vec": 1, "cache": 8}), g7168)
    assert why and "2048" in why and "H=7168 at T128_H7168" in why
    assert FAM.check(FAM.genome({"block": 256, "vec": 4, "cache": 8}), g7168) is None  # 8192 >= 7168
    # (check_geometry keeps H a multiple of 8; check() still names the load width for any other H)
    why = FAM.check(FAM.genome({"vec": 8}), [Geometry("odd", {"T": 1, "H": 4100})])
    assert why and "vec=8" in why and "H=4100" in why
    assert FAM.check(FAM.genome({"vec": 4}), [Geometry("odd", {"T": 1, "H": 4100})]) is None


def test_knob_space_counts():
    assert len(ALL) == 200 and len(VALID) == 198
    campaign_valid = [g for g in ALL if FAM.check(g, _config_geometries()) is None]
    assert len(campaign_valid) == 78


# --- inputs, reference, launch ----------------------------------------------------------------------


def test_make_inputs_fresh_per_seed_and_never_zero():
    import torch

    g = Geometry("small", {"T": 4, "H": 512})
    a, a2, b = FAM.make_inputs(g, 0, "cpu"), FAM.make_inputs(g, 0, "cpu"), FAM.make_inputs(g, 1, "cpu")
    for name, shape in (("x", (4, 512)), ("residual", (4, 512)), ("weight", (512,))):
        t = a[name]
        assert t.dtype == torch.bfloat16 and tuple(t.shape) == shape and t.is_contiguous()
        assert (t != 0).all(), f"{name} holds zeros"
        assert torch.equal(t, a2[name]), f"{name}: the same seed gives the same inputs"
        assert not torch.equal(t, b[name]), f"{name}: another seed gives other inputs"
    w = a["weight"].double()
    assert 0.9 < w.mean().item() < 1.1 and w.std().item() < 0.2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_is_the_plain_float64_math(seed):
    import torch

    T, H = 3, 64
    g = Geometry("small", {"T": T, "H": H})
    inp = FAM.make_inputs(g, seed, "cpu")
    ref = FAM.reference(inp, g)
    assert ref["out"].dtype == torch.float64 and ref["residual_out"].dtype == torch.float64
    x, res, w = inp["x"].double(), inp["residual"].double(), inp["weight"].double()
    for t in range(T):
        # r: the exact sum of two bf16 values, rounded once to bf16 (the float32 sum is exact at these values)
        r = (x[t] + res[t]).to(torch.bfloat16).double()
        assert torch.equal(ref["residual_out"][t], r)
        ms = sum(v * v for v in r.tolist()) / H
        want = torch.tensor(
            [v / math.sqrt(ms + MOD.EPS) * wv for v, wv in zip(r.tolist(), w.tolist())], dtype=torch.float64
        )
        torch.testing.assert_close(ref["out"][t], want, rtol=1e-12, atol=0)
    f32 = FAM.reference(inp, g, torch.float32)
    assert f32["out"].dtype == torch.float32
    torch.testing.assert_close(f32["out"].double(), ref["out"], rtol=1e-5, atol=1e-6)


def test_launch_args_and_bytes_moved():
    import torch

    for T, H in ((1, 4096), (32, 4096), (128, 7168), (4096, 4096)):
        g = Geometry("g", {"T": T, "H": H})
        assert FAM.bytes_moved(g) == 8 * T * H + 2 * H
        assert FAM.flops(g) > 0
        for genome in (FAM.baseline(), FAM.genome({"block": 1024, "vec": 8})):
            lc = FAM.launch(genome, g)
            assert lc.grid == (T, 1, 1) and lc.block == (genome["block"], 1, 1) and lc.shared_bytes == 0
    g = Geometry("small", {"T": 2, "H": 64})
    inp = FAM.make_inputs(g, 0, "cpu")
    outs = {o.name: torch.empty(o.shape, dtype=getattr(torch, o.dtype)) for o in FAM.outputs(g)}
    assert set(outs) == {"out", "residual_out"}
    args = FAM.kernel_args(inp, outs, g)
    assert len(args) == len(FAM.arg_types()) == 9  # ..., eps, T, H, rounds
    for t, a in zip(FAM.arg_types(), args):
        assert isinstance(a, {"p": torch.Tensor, "i": int, "f": float}[t]), (t, a)
    moved = sum(t.numel() * t.element_size() for t in list(inp.values()) + list(outs.values()))
    assert FAM.bytes_moved(g) == moved


# --- NVRTC: every valid genome -----------------------------------------------------------------------


def test_every_valid_genome_compiles_without_spills(compiled):
    from harness.build import parse_ptxas_report

    assert len(compiled) == len(VALID)
    for expr, (cubin, log, lowered) in compiled.items():
        assert cubin[:4] == b"\x7fELF"
        assert "fused_add_rmsnorm" in lowered and lowered != expr
        assert f"Compiling entry function '{lowered}'" in log, f"{expr}: ptxas report does not name {lowered}"
        res = parse_ptxas_report(log, lowered)
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame == 0, f"{expr}: {res}"
        assert 0 < res.registers <= min(255, 65536 // int(expr.split("<")[1].split(",")[0]))
    base = parse_ptxas_report(*compiled[template_id(FAM.baseline())][1:])
    assert base.barriers == 1 and base.shared_static > 0


def test_the_refused_register_cache_really_spills():
    """check()'s register rule is the compiler's: block 1024 x vec 8 x cache 8 spills under NVRTC."""
    from harness.build import parse_ptxas_report

    expr = template_id(FAM.genome({"block": 1024, "vec": 8, "cache": 8}))
    _, log, lowered = nvrtc_compile(FAM.source(), expr)
    assert parse_ptxas_report(log, lowered).spill_stores > 0


def test_the_harness_macros_do_not_change_the_kernel():
    """Today's harness prepends EVO_<KNOB> macros: the template-id still compiles, to the same machine code."""
    from harness.build import resolve_source, sass_digest

    genome = FAM.genome({"block": 512, "vec": 8, "cache": 2, "reduce": "all_warps"})
    expr = template_id(genome)
    plain, _, lowered = nvrtc_compile(FAM.source(), expr)
    prefixed, _, lowered2 = nvrtc_compile(resolve_source(FAM, genome, {}), expr)
    assert lowered == lowered2 and sass_digest(plain) == sass_digest(prefixed)


def test_faults_compile_or_fail_as_labelled():
    from harness.build import parse_ptxas_report

    expr = template_id(FAM.baseline())
    _, base_log, lowered = nvrtc_compile(FAM.source(), expr)
    base = parse_ptxas_report(base_log, lowered)
    for title in FAM.faults:
        want = FAM.fault_expectation(title)
        if want == "error: compile":
            with pytest.raises(AssertionError, match="does not compile"):
                nvrtc_compile(FAM.faulty_source(title), expr)
            continue
        _, log, low = nvrtc_compile(FAM.faulty_source(title), expr)
        res = parse_ptxas_report(log, low)
        if want == "rejected: static":
            assert res.stack_frame > base.stack_frame or res.spill_stores > base.spill_stores, title
        else:
            assert res.stack_frame == base.stack_frame == 0, title


# --- GPU --------------------------------------------------------------------------------------------


def _same(a, b) -> bool:
    """The same bits (bf16 compared as 16-bit integers: NaN payloads and -0 included)."""
    import torch

    return a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))


class _Runner:
    """Compile (NVRTC), load (CuPy) and launch one source's instantiations on torch tensors."""

    GUARD = 4096  # bytes of 0x5A either side of every output

    def __init__(self, tmp_path):
        import cupy

        major, minor = cupy.cuda.Device().compute_capability[0], cupy.cuda.Device().compute_capability[1:]
        self.arch, self.tmp, self.fns = f"sm_{major}{minor}", tmp_path, {}

    def fn(self, source: str, expr: str):
        import cupy

        key = (hashlib.sha256(source.encode()).hexdigest(), expr)
        if key not in self.fns:
            cubin, _, lowered = nvrtc_compile(source, expr, self.arch)
            path = self.tmp / f"k{len(self.fns)}.cubin"
            path.write_bytes(cubin)
            self.fns[key] = cupy.RawModule(path=str(path)).get_function(lowered)
        return self.fns[key]

    def run(self, source: str, genome, g: Geometry, inputs, poison: int = 0xFF):
        """Outputs (each inside guard bands) after one launch, and the guard bytes it overwrote."""
        import numpy as np
        import torch

        outs, bands = {}, {}
        for o in FAM.outputs(g):
            n = math.prod(o.shape)
            pad = self.GUARD // 2
            full = torch.full((n + 2 * pad,), 0, dtype=torch.bfloat16, device="cuda")
            full.view(torch.uint8).fill_(0x5A)
            outs[o.name] = full[pad : pad + n].view(o.shape)
            outs[o.name].view(torch.uint8).fill_(poison)
            bands[o.name] = (full[:pad], full[pad + n :])
        args = []
        for t, v in zip(FAM.arg_types(), FAM.kernel_args(inputs, outs, g)):
            args.append(np.uint64(v.data_ptr()) if t == "p" else np.int32(v) if t == "i" else np.float32(v))
        lc = FAM.launch(genome, g)
        torch.cuda.synchronize()
        self.fn(source, template_id(genome))(lc.grid, lc.block, tuple(args), shared_mem=lc.shared_bytes)
        torch.cuda.synchronize()
        oob = sum(int((b.view(torch.uint8) != 0x5A).sum().item()) for pair in bands.values() for b in pair)
        return {k: v.clone() for k, v in outs.items()}, oob


def _rel(out, ref) -> float:
    import torch

    d = out.double() - ref
    return (torch.linalg.vector_norm(d) / torch.linalg.vector_norm(ref)).item()


@pytest.mark.gpu
def test_gpu_every_campaign_genome_against_the_reference(tmp_path):
    import torch

    runner = _Runner(tmp_path)
    geos = _config_geometries()
    genomes = [g for g in ALL if FAM.check(g, geos) is None]
    src = FAM.source()
    for g in geos:
        for seed in range(2):
            inp = FAM.make_inputs(g, seed, "cuda")
            before = {k: v.clone() for k, v in inp.items()}
            ref = FAM.reference(inp, g)
            base, _ = runner.run(src, FAM.baseline(), g, inp)
            base_err = _rel(base["out"], ref["out"])
            assert base_err <= FAM.error_bound("out")
            by_partition: dict[tuple[int, int], object] = {}
            for genome in genomes:
                outs, oob = runner.run(src, genome, g, inp, poison=0xFF)
                again, _ = runner.run(src, genome, g, inp, poison=0x00)  # other poison: every element written
                where = f"{template_id(genome)} at {g.name} seed {seed}"
                assert oob == 0, where
                assert torch.equal(outs["residual_out"].double(), ref["residual_out"]), where
                assert _same(outs["out"], again["out"]), f"{where}: output moved between launches"
                assert torch.isfinite(outs["out"]).all(), where
                assert _rel(outs["out"], ref["out"]) <= 2.0 * base_err, where  # the campaign's tolerance_factor
                # cache and reduce are bit-preserving: one output per (block, vec) partition
                first = by_partition.setdefault((genome["block"], genome["vec"]), outs["out"])
                assert _same(first, outs["out"]), f"{where}: cache/reduce changed the bits"
            assert _same(by_partition[(256, 1)], base["out"])
            for k, v in inp.items():
                assert torch.equal(v, before[k]), f"{k} changed: the kernel must be out of place"


@pytest.mark.gpu
def test_gpu_correctness_faults_are_caught(tmp_path):
    import torch

    runner = _Runner(tmp_path)
    geos = _config_geometries()
    base_g = FAM.baseline()
    for title in FAM.faults:
        if FAM.fault_expectation(title) != "rejected: correctness":
            continue  # compile, static, crash, timeout and perf faults need the harness's isolation
        src = FAM.faulty_source(title)
        caught = []
        for g in geos:
            inp = FAM.make_inputs(g, 0, "cuda")
            ref = FAM.reference(inp, g)
            base, _ = runner.run(FAM.source(), base_g, g, inp)
            # the gate's evidence: guard bands, NaN/Inf, two runs on other poisons (unwritten elements and races
            # move the bits), then the error against float64 within 2x the baseline's wherever the bits differ
            first, oob1 = runner.run(src, base_g, g, inp, poison=0xFF)
            second, oob2 = runner.run(src, base_g, g, inp, poison=0x00)
            for k in first:
                if oob1 or oob2 or not torch.isfinite(first[k]).all() or not _same(first[k], second[k]):
                    caught.append(f"{k} at {g.name}")
                elif not _same(first[k], base[k]) and _rel(first[k], ref[k]) > 2.0 * _rel(base[k], ref[k]) + 1e-12:
                    caught.append(f"{k} at {g.name}: error")
        assert any(caught), f"fault not caught: {title}"
