"""Real NVRTC compiles of mhc_pre_big_fuse at sm_90 (no GPU needed): ptxas report, cubin, SASS identity, cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("cupy")  # NVRTC comes with CuPy (from cupy.cuda import nvrtc); no GPU needed

import harness.build as hb  # noqa: E402
from evo.core.family import Geometry, load_family  # noqa: E402
from harness.build import (
    Builder,
    BuildError,
    compile_source,
    parse_ptxas_report,
    resolve_source,  # noqa: E402
    resources_from_cubin,
    sass_digest,
)

FAM = load_family("mhc_pre_big_fuse")
ARCH = "sm_90"
G_S1 = Geometry("T4096_H4096", {"T": 4096, "H": 4096, "S": 1, "prenorm": False}, 1.0)
G_S32 = Geometry("T1_H4096_S32", {"T": 1, "H": 4096, "S": 32, "prenorm": False}, 0.0)
G_PRE = Geometry("T64_H4096_pre", {"T": 64, "H": 4096, "S": 1, "prenorm": True}, 1.0)
S1, S32, PRE = "S=1,prenorm=0", "S=32,prenorm=0", "S=1,prenorm=1"


def _builder(*geos: Geometry) -> Builder:
    return Builder(FAM, list(geos), ARCH)


def test_builder_specializations():
    b = _builder(G_S1, G_S32, G_PRE, Geometry("T4096_H7168", {"T": 4096, "H": 7168, "S": 1, "prenorm": False}))
    assert sorted(b.specs) == sorted([S1, S32, PRE])  # two S=1 geometries share one module
    assert b.spec_of(G_S32) == S32
    assert b.arch == ARCH


def test_baseline_array_meta_has_the_stack_frame_slice_has_none():
    """The spill the study found: the 24-float metadata array indexed by lane lives in local memory."""
    b = _builder(G_S1, G_S32)
    base = b.build(FAM.baseline())
    sl = b.build(FAM.baseline().replace(meta="slice"))
    for key in (S1, S32):
        assert base.modules[key].resources.stack_frame == 96, base.modules[key].log
        assert sl.modules[key].resources.stack_frame == 0, sl.modules[key].log
        assert base.modules[key].resources.report == "ptxas"
        assert 0 < base.modules[key].resources.registers <= 255
    assert base.sass_sha256 != sl.sass_sha256


CAPTURED = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other_kernel' for 'sm_90'
ptxas info    : Function properties for other_kernel
ptxas         .     16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, 16 bytes cumulative stack size, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'mhc_pre_big_fuse' for 'sm_90'
ptxas info    : Function properties for _Z6helperPf
ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for mhc_pre_big_fuse
ptxas         .     96 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 96 bytes cumulative stack size, 148 bytes smem
ptxas info    : Compile time = 95.041 ms
"""


def test_parse_ptxas_report_captured_log():
    r = parse_ptxas_report(CAPTURED, "mhc_pre_big_fuse")
    assert (r.registers, r.barriers, r.stack_frame, r.spill_stores, r.spill_loads, r.shared_static) == (
        40,
        1,
        96,
        8,
        12,
        148,
    )
    assert r.spills == 20 and r.report == "ptxas"
    o = parse_ptxas_report(CAPTURED, "other_kernel")
    assert (o.registers, o.barriers, o.stack_frame, o.spill_stores, o.shared_static) == (255, 0, 16, 4, 0)


def test_parse_ptxas_report_missing_entry_raises():
    with pytest.raises(BuildError, match="no ptxas resource report for nope"):
        parse_ptxas_report(CAPTURED, "nope")
    with pytest.raises(BuildError, match="empty log"):
        parse_ptxas_report("", "mhc_pre_big_fuse")


def test_parse_ptxas_report_on_a_real_log():
    b = _builder(G_S1)
    m = b.build(FAM.baseline()).modules[S1]
    assert "Function properties for mhc_pre_big_fuse" in m.log
    assert parse_ptxas_report(m.log, FAM.entry) == m.resources


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"meta": "slice"},
        {"block": 512, "unroll": 4},
        {"vec": 8, "h_split": 2, "barrier": "early"},
    ],
)
def test_resources_from_cubin_agree_with_ptxas(changes):
    b = _builder(G_S1, G_S32, G_PRE)
    built = b.build(FAM.genome(changes))
    assert sorted(built.modules) == sorted([S1, S32, PRE])
    for key, m in built.modules.items():
        cub = resources_from_cubin(Path(m.cubin_path).read_bytes(), FAM.entry)
        r = m.resources
        assert cub.report == "cubin"
        assert (cub.registers, cub.stack_frame, cub.shared_static) == (r.registers, r.stack_frame, r.shared_static), (
            changes,
            key,
        )
    # prenorm uses shared memory for the block's square sum: the agreement is over a real difference.
    assert built.modules[PRE].resources.shared_static > built.modules[S1].resources.shared_static


def test_resources_from_cubin_unknown_entry():
    m = _builder(G_S1).build(FAM.baseline()).modules[S1]
    with pytest.raises(BuildError, match="no code section for nope"):
        resources_from_cubin(Path(m.cubin_path).read_bytes(), "nope")


def test_empty_ptxas_log_falls_back_to_the_cubin(monkeypatch, tmp_path):
    want = _builder(G_S1).build(FAM.baseline()).modules[S1].resources  # from ptxas
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    real = hb.compile_program
    calls = []

    def no_log(source, entry, arch, options=None, name="kernel.cu"):
        c = real(source, entry, arch, options, name)
        calls.append(1)
        return c._replace(log="")

    monkeypatch.setattr(hb, "compile_program", no_log)
    m = _builder(G_S1).build(FAM.baseline()).modules[S1]
    assert len(calls) == 2  # one retry before reading the cubin
    assert m.resources.report == "cubin"
    assert want.report == "ptxas" and want.stack_frame == 96
    assert (m.resources.registers, m.resources.stack_frame, m.resources.shared_static) == (
        want.registers,
        want.stack_frame,
        want.shared_static,
    )


def test_sass_equal_only_where_machine_code_is_equal():
    warp = FAM.baseline().replace(split_reduce="warp")
    b1 = _builder(G_S1)
    # At S = 1 there is nothing to split: serial and warp are the same machine code.
    assert b1.build(FAM.baseline()).sass_sha256 == b1.build(warp).sass_sha256
    b32 = _builder(G_S32)
    assert b32.build(FAM.baseline()).sass_sha256 != b32.build(warp).sass_sha256
    both = _builder(G_S1, G_S32)
    assert both.build(FAM.baseline()).sass_sha256 != both.build(warp).sass_sha256
    # Other knobs change code at S = 1 too.
    base1 = b1.build(FAM.baseline()).sass_sha256
    for ch in ({"block": 128}, {"vec": 8}, {"barrier": "early"}):
        assert b1.build(FAM.genome(ch)).sass_sha256 != base1, ch


def test_sass_equal_for_different_source_text(monkeypatch, tmp_path):
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "fresh"))
    b = _builder(G_S1)
    base = b.build(FAM.baseline())
    commented = b.build(FAM.baseline(), FAM.source() + "\n// a comment changes the source, not the code\n")
    assert commented.source_sha256 != base.source_sha256
    assert commented.modules[S1].cached is False
    assert commented.sass_sha256 == base.sass_sha256


def test_sass_digest_reads_only_code_sections():
    m = _builder(G_S1).build(FAM.baseline()).modules[S1]
    cubin = Path(m.cubin_path).read_bytes()
    assert sass_digest(cubin) == m.sass_sha256
    secs = hb._elf_sections(cubin)
    text = next((o, s) for n, o, s, _ in secs if n == f".text.{FAM.entry}")
    other = next((o, s) for n, o, s, _ in secs if n.startswith(".nv.info") and s > 0)

    def flip(at: int) -> bytes:
        b = bytearray(cubin)
        b[at] ^= 0xFF
        return bytes(b)

    assert sass_digest(flip(other[0] + other[1] - 1)) == m.sass_sha256  # metadata is not machine code
    assert sass_digest(flip(text[0] + 16)) != m.sass_sha256
    assert sass_digest(b"not an elf") == hashlib.sha256(b"not an elf").hexdigest()


def test_compile_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "fresh"))
    b = _builder(G_S1, G_S32)
    g = FAM.baseline().replace(block=128)
    first = b.build(g)
    assert all(not m.cached for m in first.modules.values())
    assert all(m.compile_s > 0 for m in first.modules.values())
    assert len(list((tmp_path / "fresh").glob("*.cubin"))) == 2
    second = b.build(g)
    assert all(m.cached for m in second.modules.values())
    assert second.compile_s == 0
    for key in first.modules:
        a, c = first.modules[key], second.modules[key]
        assert (a.cubin_sha256, a.sass_sha256, a.resources) == (c.cubin_sha256, c.sass_sha256, c.resources)
        assert Path(c.cubin_path).is_file()
        assert hashlib.sha256(Path(c.cubin_path).read_bytes()).hexdigest() == c.cubin_sha256
    # Another genome is another cache entry.
    assert all(not m.cached for m in b.build(g.replace(block=512)).modules.values())


def test_lineinfo_is_a_separate_cache_entry_with_the_same_sass(monkeypatch, tmp_path):
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "fresh"))
    b = _builder(G_S1)
    plain = b.build(FAM.baseline()).modules[S1]
    monkeypatch.setenv("EVO_LINEINFO", "1")
    lined = b.build(FAM.baseline()).modules[S1]
    assert not lined.cached and lined.cubin_path != plain.cubin_path
    assert lined.sass_sha256 == plain.sass_sha256  # line tables only: the machine code is the same

    def names(m):
        return {n for n, *_ in hb._elf_sections(Path(m.cubin_path).read_bytes())}

    assert ".debug_line" in names(lined) and ".debug_line" not in names(plain)


def test_syntax_error_raises_one_line_build_error():
    bad = FAM.source().replace("const int token = blockIdx.x / EVO_H_SPLIT;", "const int token = blockIdx.x / ;")
    assert bad != FAM.source()
    with pytest.raises(BuildError) as ei:
        _builder(G_S1).build(FAM.baseline(), bad)
    msg = str(ei.value)
    assert "\n" not in msg and "error" in msg
    assert "error" in ei.value.log
    with pytest.raises(BuildError) as ei:
        compile_source('extern "C" __global__ void k() { int x = ; }', "k", ARCH)
    assert "\n" not in str(ei.value) and "error" in str(ei.value)


def test_resolve_source_has_the_macros():
    g = FAM.baseline().replace(meta="slice", warp0_stream=True, h_split=4)
    src = resolve_source(FAM, g, {"S": 32, "prenorm": False})
    lines = src.splitlines()
    for want in (
        "#define EVO_BLOCK 256",
        "#define EVO_META EVO_META_SLICE",
        "#define EVO_META_ARRAY 0",
        "#define EVO_META_SLICE 1",
        "#define EVO_SPLIT_REDUCE EVO_SPLIT_REDUCE_SERIAL",
        "#define EVO_WARP0_STREAM 1",
        "#define EVO_H_SPLIT 4",
        "#define EVO_VEC 16",
        "#define EVO_UNROLL 1",
        "#define EVO_BARRIER EVO_BARRIER_LATE",
        "#define EVO_S 32",
        "#define EVO_PRENORM 0",
    ):
        assert want in lines, want
    assert lines[0].startswith("// evo: family mhc_pre_big_fuse, genome {")
    assert '#line 1 "kernel.cu"' in lines
    assert src.endswith(FAM.source())
    # The macros come before the kernel, so the kernel's #ifndef defaults do not win.
    assert src.index("#define EVO_BLOCK 256") < src.index('#line 1 "kernel.cu"')


# ---------------------------------------------------------------------------
# Macro families are built as before: the same resolved source, cache key, identity and SASS


def test_macro_family_cache_key_identity_and_sass_as_before(monkeypatch, tmp_path):
    import json

    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "fresh"))
    b = _builder(G_S1)
    built = b.build(FAM.baseline())
    m, src = built.modules[S1], built.source[S1]
    src_sha = hashlib.sha256(src.encode()).hexdigest()
    # The key as it was computed before headers and options took part (no header, no option: nothing added).
    old_key = hashlib.sha256(f"{src_sha}|{ARCH}|{hb.nvrtc_version()}|{FAM.entry}".encode()).hexdigest()[:32]
    assert Path(m.cubin_path).name == f"{old_key}.cubin"
    assert m.source_sha256 == src_sha and m.function == FAM.entry
    assert m.sass_sha256 == sass_digest(Path(m.cubin_path).read_bytes())
    assert json.loads(Path(m.cubin_path).with_suffix(".json").read_text())["function"] == FAM.entry
    # The CUDA include folders NVRTC now gets change nothing in the machine code.
    bare, _, _ = compile_source(src, FAM.entry, ARCH, options=[])
    assert hashlib.sha256(bare).hexdigest() == m.cubin_sha256


@pytest.mark.parametrize("name", ["mhc_pre_big_fuse", "mhc_prenorm_gemm", "moe_q2_matvec", "fp4_matvec"])
def test_resolve_source_unchanged_for_shipped_families(name):
    """resolve_source of every shipped family's baseline, against the macros as they were always written."""
    import json

    from evo.config import load_config

    cfg = load_config(f"configs/{name}.yaml")
    fam = cfg.family
    g = fam.baseline()
    assert fam.template_knobs == () and fam.entry_expression(g, {}) == fam.entry
    for geo in cfg.geometries:
        spec = fam.specialization(geo)
        lines = [f"// evo: family {fam.name}, genome {json.dumps(dict(sorted(g.items())), separators=(',', ':'))}"]
        for k in fam.knobs:
            if any(isinstance(v, str) for v in k.values):
                lines += [f"#define EVO_{k.name.upper()}_{str(v).upper()} {i}" for i, v in enumerate(k.values)]
        for k in fam.knobs:
            v = g[k.name]
            v = int(v) if isinstance(v, bool) else f"EVO_{k.name.upper()}_{v.upper()}" if isinstance(v, str) else v
            lines.append(f"#define EVO_{k.name.upper()} {v}")
        lines += [f"#define EVO_{n.upper()} {int(v) if isinstance(v, bool) else v}" for n, v in spec.items()]
        want = "\n".join(lines) + '\n#line 1 "kernel.cu"\n' + fam.source()
        assert resolve_source(fam, g, spec) == want, geo.name


def test_compile_error_is_exactly_the_first_error_line():
    with pytest.raises(BuildError) as ei:
        compile_source('extern "C" __global__ void k(float* y) {\n  y[0] = undefined_x;\n}\n', "k", ARCH)
    assert str(ei.value) == 'compile error: kernel.cu(2): error: identifier "undefined_x" is undefined'
    log = (
        'kernel.cu(1): warning #177-D: variable "error_count" was declared but never referenced\n'
        'my.cuh(3): error: expected a ";"\n1 error detected in the compilation of "kernel.cu".\n'
    )
    assert hb.first_error(log) == 'my.cuh(3): error: expected a ";"'
    assert (
        hb.first_error("nvrtc: error: unrecognized option -foo found\n")
        == "nvrtc: error: unrecognized option -foo found"
    )
