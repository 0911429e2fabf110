"""Kernels as engines write them, compiled by NVRTC at sm_90 (no GPU needed): CUDA's headers, the family's own
headers in the cache key, compile errors with file and line, template knobs, and the NVRTC options evo keeps."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cupy")  # NVRTC comes with CuPy (from cupy.cuda import nvrtc); no GPU needed

import harness.build as hb  # noqa: E402
from evo.core.family import FamilyError, Geometry, Knob, load_family  # noqa: E402
from harness.build import (
    Builder,
    BuildError,
    Includes,
    compile_program,
    cuda_include_dirs,  # noqa: E402
    parse_ptxas_report,
    resources_from_cubin,
    sass_digest,
)

ARCH = "sm_90"

# One small kernel per CUDA header an engine's kernel includes.
HEADER_KERNELS = {
    "cuda_bf16.h": """
        #include <cuda_bf16.h>
        extern "C" __global__ void k(__nv_bfloat16* x) { x[threadIdx.x] = __hadd(x[0], __float2bfloat16(1.0f)); }""",
    "cuda_fp16.h": """
        #include <cuda_fp16.h>
        extern "C" __global__ void k(__half* x) { x[threadIdx.x] = __hmul(x[0], __float2half(2.0f)); }""",
    "cuda_fp8.h": """
        #include <cuda_fp8.h>
        extern "C" __global__ void k(const __nv_fp8_e4m3* x, float* y) { y[threadIdx.x] = float(x[threadIdx.x]); }""",
    "cuda_pipeline.h": """
        #include <cuda_pipeline.h>
        extern "C" __global__ void k(const float* x, float* y) {
            __shared__ float s[128];
            __pipeline_memcpy_async(&s[threadIdx.x], &x[threadIdx.x], sizeof(float));
            __pipeline_commit();
            __pipeline_wait_prior(0);
            y[threadIdx.x] = s[threadIdx.x];
        }""",
    "cooperative_groups.h": """
        #include <cooperative_groups.h>
        namespace cg = cooperative_groups;
        extern "C" __global__ void k(float* y) {
            cg::thread_block b = cg::this_thread_block();
            auto warp = cg::tiled_partition<32>(b);
            y[threadIdx.x] = warp.shfl_down(y[threadIdx.x], 1);
            b.sync();
        }""",
    "cub/block/block_reduce.cuh": """
        #include <cub/block/block_reduce.cuh>
        extern "C" __global__ void k(const float* x, float* y) {
            using Reduce = cub::BlockReduce<float, 128>;
            __shared__ typename Reduce::TempStorage tmp;
            float s = Reduce(tmp).Sum(x[threadIdx.x]);
            if (threadIdx.x == 0) *y = s;
        }""",
    "cuda/std/array+limits": """
        #include <cuda/std/array>
        #include <cuda/std/limits>
        extern "C" __global__ void k(float* y) {
            cuda::std::array<float, 4> a{1.f, 2.f, 3.f, 4.f};
            y[threadIdx.x] = a[threadIdx.x & 3] * cuda::std::numeric_limits<float>::epsilon();
        }""",
    "cuda/barrier": """
        #include <cuda/barrier>
        extern "C" __global__ void k(float* y) {
            __shared__ cuda::barrier<cuda::thread_scope_block> bar;
            if (threadIdx.x == 0) init(&bar, blockDim.x);
            __syncthreads();
            y[threadIdx.x] = 1.f;
            bar.arrive_and_wait();
        }""",
}


@pytest.mark.parametrize("header", sorted(HEADER_KERNELS))
def test_cuda_headers_compile_out_of_the_box(header):
    c = compile_program(textwrap.dedent(HEADER_KERNELS[header]), "k", ARCH)
    assert c.function == "k" and c.cubin[:4] == b"\x7fELF"
    assert parse_ptxas_report(c.log, "k").registers > 0


def test_cuda_include_dirs_put_cccl_first():
    dirs = cuda_include_dirs()
    assert dirs, "no CUDA headers found: neither a toolkit nor the nvidia-cuda-runtime/-cccl wheels"
    assert (Path(dirs[0]) / "cuda" / "std" / "version").is_file()  # cub, cuda/std, cuda/barrier
    assert (Path(dirs[-1]) / "cuda_runtime.h").is_file()


def _fake_toolkit(root: Path, cudart_version: int, cccl: bool = True) -> Path:
    inc = root / "include"
    inc.mkdir(parents=True)
    (inc / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {cudart_version}\n")
    if cccl:
        (inc / "cccl" / "cuda" / "std").mkdir(parents=True)
        (inc / "cccl" / "cuda" / "std" / "version").write_text("")
    return root


def test_toolkit_roots_in_order(monkeypatch, tmp_path):
    nvcc = tmp_path / "tk" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_PATH", "/a")
    monkeypatch.setenv("CUDA_HOME", "/b")
    monkeypatch.setenv("PATH", str(nvcc.parent))
    assert hb._toolkit_roots() == [Path("/a"), Path("/b"), tmp_path / "tk", Path("/usr/local/cuda")]


def test_a_toolkit_of_nvrtcs_major_version_before_the_wheels(monkeypatch, tmp_path):
    major = int(hb.nvrtc_version().split(".")[0])
    same = _fake_toolkit(tmp_path / "same", major * 1000 + 20)
    older = _fake_toolkit(tmp_path / "older", (major - 1) * 1000 + 40, cccl=False)
    wheels = ("/site/nvidia/cu13/include/cccl", "/site/nvidia/cu13/include")
    monkeypatch.setattr(hb, "_wheel_include_dirs", lambda: wheels)
    try:
        for roots, want in [
            ([older, same], (f"{same}/include/cccl", f"{same}/include")),
            ([older], wheels),
            ([tmp_path / "none"], wheels),
        ]:
            monkeypatch.setattr(hb, "_toolkit_roots", lambda roots=roots: roots)
            hb.cuda_include_dirs.cache_clear()
            assert hb.cuda_include_dirs() == want, roots
        monkeypatch.setattr(hb, "_wheel_include_dirs", lambda: ())
        monkeypatch.setattr(hb, "_toolkit_roots", lambda: [older])
        hb.cuda_include_dirs.cache_clear()
        assert hb.cuda_include_dirs() == (f"{older}/include",)  # another version beats no headers at all
    finally:
        hb.cuda_include_dirs.cache_clear()
        hb.cuda_headers_key.cache_clear()


def test_without_a_toolkit_the_headers_come_from_cuda_pathfinder(monkeypatch):
    """A machine with only the NVIDIA wheels: cuda-pathfinder finds nvidia-cuda-runtime's and -cccl's folders."""
    pytest.importorskip("cuda.pathfinder")
    monkeypatch.setattr(hb, "_toolkit_roots", lambda: [])
    hb.cuda_include_dirs.cache_clear()
    try:
        dirs = hb.cuda_include_dirs()
        assert dirs == hb._wheel_include_dirs()
        if not dirs:
            pytest.skip("cuda-pathfinder finds no CUDA headers here (install nvidia-cuda-runtime and -cccl)")
        for header in ("cuda_bf16.h", "cub/block/block_reduce.cuh", "cuda/barrier"):
            c = compile_program(textwrap.dedent(HEADER_KERNELS[header]), "k", ARCH, [f"-I{d}" for d in dirs])
            assert parse_ptxas_report(c.log, "k").registers > 0, header
    finally:
        hb.cuda_include_dirs.cache_clear()


# ---------------------------------------------------------------------------
# A family written to tmp_path, with headers of its own and an extra include folder

FAMILY_PY = """
from evo.core.family import Family, GeometryParam, Knob, Launch


class Tiny(Family):
    def outputs(self, geometry):
        return []

    def make_inputs(self, geometry, seed, device):
        return {}

    def reference(self, inputs, geometry, dtype=None):
        return {}

    def launch(self, genome, geometry):
        return Launch((1, 1, 1), (genome.get("block", 128), 1, 1))

    def kernel_args(self, inputs, outputs, geometry):
        return []

    def specialization(self, geometry):
        return {"n": geometry["n"]}


FAMILY = Tiny(entry=ENTRY, knobs=KNOBS, geometry_params=(GeometryParam("n", int),), include_dirs=INCLUDE_DIRS,
              nvrtc_options=OPTIONS)
"""

PLAIN_KERNEL = """\
#include <cuda_bf16.h>
#include "local.cuh"
#include <extra.cuh>

extern "C" __global__ void __launch_bounds__(EVO_BLOCK) tiny(const __nv_bfloat16* x, float* y) {
    y[threadIdx.x] = local_scale(__bfloat162float(x[threadIdx.x])) + EXTRA_OFFSET;
}
"""

TEMPLATE_KERNEL = """\
#include <cuda_bf16.h>
#include "local.cuh"

template <int BLOCK, int VEC, bool TWO_PASS, typename T, int N, int UNUSED>
__global__ void __launch_bounds__(BLOCK) tiny_t(const T* __restrict__ x, float* __restrict__ y) {
    float acc = 0.f;
    for (int i = threadIdx.x * VEC; i < N; i += BLOCK * VEC) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc += local_scale(float(x[i + v]));
    }
    if (TWO_PASS) acc = acc * acc + 1.f;
    y[threadIdx.x] = acc;
}
"""


def write_family(
    root: Path,
    name: str,
    kernel: str,
    entry: str,
    knobs: str = "(Knob('block', (128, 256), 128),)",
    include_dirs: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
    local: str | None = None,
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    text = FAMILY_PY.replace("ENTRY", repr(entry)).replace("KNOBS", knobs)
    text = text.replace("INCLUDE_DIRS", repr(tuple(include_dirs))).replace("OPTIONS", repr(tuple(options)))
    (folder / "family.py").write_text(text)
    (folder / "kernel.cu").write_text(kernel)
    (folder / "local.cuh").write_text(
        local
        or '#pragma once\n#include "sub/nested.cuh"\n'
        "__device__ __forceinline__ float local_scale(float v) { return v * SCALE; }\n"
    )
    (folder / "sub").mkdir()
    (folder / "sub" / "nested.cuh").write_text("#pragma once\n#define SCALE 2.0f\n")
    return folder


G = Geometry("n1024", {"n": 1024})


@pytest.fixture
def cache(monkeypatch, tmp_path):
    d = tmp_path / "cache"
    monkeypatch.setenv("EVO_CACHE_DIR", str(d))
    return d


def test_headers_from_the_family_folder_and_an_include_dir_are_in_the_cache_key(tmp_path, cache):
    extra = tmp_path / "engine" / "include"
    extra.mkdir(parents=True)
    (extra / "extra.cuh").write_text("#pragma once\n#define EXTRA_OFFSET 1.0f\n")
    write_family(tmp_path / "fams", "plain", PLAIN_KERNEL, "tiny")
    fam = load_family("plain", tmp_path / "fams")
    b = Builder(fam, [G], ARCH, include_dirs=[str(extra)])
    assert b.includes.local == (str(fam.folder.resolve()), str(extra))

    def build():
        return b.build(fam.baseline()).modules["n=1024"]

    first = build()
    assert not first.cached and first.function == "tiny" and first.resources.registers > 0
    assert first.source_sha256 != hashlib.sha256(b.build(fam.baseline()).source["n=1024"].encode()).hexdigest()
    assert build().cached
    seen = {(first.cubin_path, first.source_sha256, first.sass_sha256)}
    edits = [
        (fam.folder / "local.cuh", "v * SCALE", "v * SCALE * 3.0f"),  # the family's own header
        (fam.folder / "sub" / "nested.cuh", "2.0f", "5.0f"),  # one it includes, by its own folder
        (extra / "extra.cuh", "1.0f", "7.0f"),
    ]  # the campaign's include folder
    for path, old, new in edits:
        path.write_text(path.read_text().replace(old, new))
        m = build()
        assert not m.cached, path  # a header edit rebuilds
        key = (m.cubin_path, m.source_sha256, m.sass_sha256)
        assert all(key[i] != s[i] for s in seen for i in range(3)), path  # new key, identity and machine code
        seen.add(key)
        assert build().cached
    # A comment in a header: a new cache entry and source identity, the same machine code (SASS dedupe still holds).
    path = fam.folder / "local.cuh"
    path.write_text(path.read_text() + "// a comment\n")
    m = build()
    assert not m.cached and m.source_sha256 not in {s[1] for s in seen} and m.sass_sha256 == key[2]


def test_scan_follows_nvrtcs_search_order(tmp_path):
    fam, inc = tmp_path / "fam", tmp_path / "inc"
    (fam / "sub").mkdir(parents=True)
    inc.mkdir()
    (fam / "a.cuh").write_text('#include "sub/b.cuh"\n#include <c.cuh>\n#include <cuda_fp16.h>\n')
    (fam / "sub" / "b.cuh").write_text('#include "d.cuh"\n  #  include "a.cuh"\n')  # d.cuh: beside b.cuh
    (fam / "sub" / "d.cuh").write_text("")
    (inc / "c.cuh").write_text("")
    (fam / "c.cuh").write_text("// shadows inc/c.cuh: the family folder comes first\n")
    inc_ = Includes((str(fam), str(inc)), str(fam), ())
    headers, cuda = inc_.scan('#include "a.cuh"\n')
    assert sorted(headers) == ["a.cuh", "c.cuh", "sub/b.cuh", "sub/d.cuh"] and cuda
    assert headers["c.cuh"] == hashlib.sha256((fam / "c.cuh").read_bytes()).hexdigest()
    assert Includes((str(fam), str(inc)), str(fam), ()).scan('extern "C" __global__ void k() {}') == ({}, False)


def test_a_compile_error_in_an_included_header_names_its_file_and_line(tmp_path, cache):
    bad = "#pragma once\n\n__device__ __forceinline__ float local_scale(float v) { return v * nope; }\n"
    write_family(
        tmp_path / "fams",
        "broken",
        PLAIN_KERNEL.replace("#include <extra.cuh>\n", "#define EXTRA_OFFSET 0\n"),
        "tiny",
        local=bad,
    )
    fam = load_family("broken", tmp_path / "fams")
    with pytest.raises(BuildError) as ei:
        Builder(fam, [G], ARCH).build(fam.baseline())
    header = fam.folder.resolve() / "local.cuh"
    assert str(ei.value) == f'compile error: {header}(3): error: identifier "nope" is undefined'
    assert "1 error detected" in ei.value.log
    # An error in kernel.cu itself: its own line numbers (the macros before it do not count).
    (fam.folder / "local.cuh").write_text(bad.replace("nope", "2.0f"))
    (fam.folder / "kernel.cu").write_text(fam.source().replace("+ EXTRA_OFFSET;", "+ EXTRA_OFFSET + missing;"))
    with pytest.raises(BuildError) as ei:
        Builder(fam, [G], ARCH).build(fam.baseline())
    assert str(ei.value) == 'compile error: kernel.cu(6): error: identifier "missing" is undefined'
    # A header that is not there: the catastrophic error line, with the including file and line.
    (fam.folder / "kernel.cu").write_text('#include "local.cuh"\n#include "gone.cuh"\n')
    with pytest.raises(BuildError) as ei:
        Builder(fam, [G], ARCH).build(fam.baseline())
    assert str(ei.value).startswith(
        'compile error: kernel.cu(2): catastrophic error: cannot open source file "gone.cuh" (searched: '
    )


TEMPLATE_KNOBS = (
    "(Knob('block', (128, 256), 256), Knob('vec', (1, 4), 1), Knob('two_pass', (False, True), False),"
    " Knob('dtype', ('float', '__nv_bfloat16'), 'float'), Knob('unused', (0, 1), 0))"
)
TEMPLATE_ENTRY = "tiny_t<{block}, {vec}, {two_pass}, {dtype}, {n}, {unused}>"


def test_template_knobs_compile_through_name_expressions(tmp_path, cache):
    write_family(tmp_path / "fams", "tmpl", TEMPLATE_KERNEL, TEMPLATE_ENTRY, TEMPLATE_KNOBS)
    fam = load_family("tmpl", tmp_path / "fams")
    assert fam.template_knobs == ("block", "vec", "two_pass", "dtype", "unused")
    g1 = fam.baseline()
    g2 = fam.genome({"block": 128, "vec": 4, "two_pass": True, "dtype": "__nv_bfloat16"})
    assert fam.entry_expression(g1, {"n": 1024}) == "tiny_t<256, 1, false, float, 1024, 0>"
    assert fam.entry_expression(g2, {"n": 1024}) == "tiny_t<128, 4, true, __nv_bfloat16, 1024, 0>"
    b = Builder(fam, [G], ARCH)
    m1, m2 = (b.build(g).modules["n=1024"] for g in (g1, g2))
    assert m1.function == "_Z6tiny_tILi256ELi1ELb0EfLi1024ELi0EEvPKT2_Pf"
    assert m2.function.startswith("_Z6tiny_tILi128ELi4ELb1E13__nv_bfloat16") and m2.function != m1.function
    for m in (m1, m2):
        cubin = Path(m.cubin_path).read_bytes()
        assert f".text.{m.function}" in {n for n, *_ in hb._elf_sections(cubin)}
        assert m.resources.report == "ptxas" and m.resources.registers > 0
        assert parse_ptxas_report(m.log, m.function) == m.resources  # ptxas reports under the lowered name
        cub = resources_from_cubin(cubin, m.function)
        assert (cub.registers, cub.stack_frame) == (m.resources.registers, m.resources.stack_frame)
        assert sass_digest(cubin) != m.sass_sha256  # hashed under the template's name, not the instance's
        assert sass_digest(cubin, {m.function: "tiny_t"}) == m.sass_sha256
    assert m1.sass_sha256 != m2.sass_sha256  # other template arguments, other machine code
    from gates.static import PASS, identical_sass, static_gate

    assert static_gate({"n=1024": m2.resources}, {"n=1024": m1.resources}) == PASS  # the static gate reads them
    assert identical_sass(m2.sass_sha256, {m1.sass_sha256: 1}) == PASS
    again = b.build(g2).modules["n=1024"]
    assert again.cached and again.function == m2.function  # the lowered name is kept in the cache's meta
    # A template argument the code does not use: another instance, the same machine code, measured once.
    m3 = b.build(g1.replace(unused=1)).modules["n=1024"]
    assert m3.function != m1.function and m3.sass_sha256 == m1.sass_sha256
    assert "identical SASS to attempt #1" in identical_sass(m3.sass_sha256, {m1.sass_sha256: 1}).reason
    # The knob macros are still defined for every knob (a template family may use them too).
    src = b.build(g2).source["n=1024"]
    assert "#define EVO_DTYPE EVO_DTYPE___NV_BFLOAT16" in src and "#define EVO_TWO_PASS 1" in src


def test_a_bad_placeholder_is_refused_in_one_line(tmp_path):
    write_family(
        tmp_path / "fams",
        "typo",
        TEMPLATE_KERNEL,
        "tiny_t<{block}, {vecc}, {n}>",
        "(Knob('block', (128, 256), 256), Knob('vec', (1, 4), 1))",
    )
    with pytest.raises(FamilyError) as ei:
        load_family("typo", tmp_path / "fams")
    msg = str(ei.value)
    assert "\n" not in msg and "'vecc'" in msg and "not a knob" in msg and "block, vec" in msg
    assert "'n'" not in msg.split(" names ")[1].split(",")[0]  # n is a geometry param: fine
    # The builder holds the placeholders against its specializations too.
    write_family(tmp_path / "fams", "nospec", TEMPLATE_KERNEL, "tiny_t<{block}, {n}>")
    fam = load_family("nospec", tmp_path / "fams")
    fam.specialization = lambda geometry: {}
    with pytest.raises(ValueError, match=r"names 'n', not a knob or one of the specialization keys") as ei:
        Builder(fam, [G], ARCH)
    assert "\n" not in str(ei.value)


def test_a_wrong_template_argument_list_says_which_entry(tmp_path, cache):
    write_family(tmp_path / "fams", "arity", TEMPLATE_KERNEL, "tiny_t<{block}>")
    fam = load_family("arity", tmp_path / "fams")
    with pytest.raises(
        BuildError, match=r"^compile error: __nv_name_map\(\d+\): error: .* \(the entry 'tiny_t<128>'\)$"
    ):
        Builder(fam, [G], ARCH).build(fam.baseline())


# ---------------------------------------------------------------------------
# NVRTC options: the family's and the campaign's, never instead of evo's own


@pytest.mark.parametrize(
    "option",
    [
        "--gpu-architecture=sm_80",
        "-arch=sm_80",
        "-arch",
        "-I/usr/include",
        "--include-path=/x",
        "-dlto",
        "--fdevice-syntax-only",
    ],
)
def test_options_that_take_away_what_evo_needs_are_refused(tmp_path, option):
    write_family(tmp_path / "fams", "opts", PLAIN_KERNEL, "tiny")
    fam = load_family("opts", tmp_path / "fams")
    with pytest.raises(BuildError, match=f"nvrtc option '{option}' is not allowed"):
        Builder(fam, [G], ARCH, nvrtc_options=[option])
    fam.nvrtc_options = (option,)
    with pytest.raises(BuildError, match=f"nvrtc option '{option}' is not allowed"):
        Builder(fam, [G], ARCH)


def test_options_and_include_dirs_of_the_family_and_the_campaign(tmp_path, cache):
    (tmp_path / "fams" / "inc").mkdir(parents=True)
    (tmp_path / "fams" / "inc" / "extra.cuh").write_text("#define EXTRA_OFFSET EXTRA\n")
    # A helper without __device__ compiles only with -default-device (cuda_tf32.h of CUDA 13.5 needs it too).
    kernel = PLAIN_KERNEL.replace('extern "C"', 'inline float helper(float v) { return v + 1.0f; }\nextern "C"')
    kernel = kernel.replace("+ EXTRA_OFFSET;", "+ helper(EXTRA_OFFSET);")
    write_family(tmp_path / "fams", "withopts", kernel, "tiny", include_dirs=("../inc",), options=("-default-device",))
    fam = load_family("withopts", tmp_path / "fams")
    base = Builder(fam, [G], ARCH, nvrtc_options=["-DEXTRA=1.0f"]).build(fam.baseline()).modules["n=1024"]
    other = Builder(fam, [G], ARCH, nvrtc_options=["-DEXTRA=2.0f"]).build(fam.baseline()).modules["n=1024"]
    assert not other.cached and other.cubin_path != base.cubin_path and other.sass_sha256 != base.sass_sha256
    assert "--std" not in base.log  # no warning about two -std options
    std = Builder(fam, [G], ARCH, nvrtc_options=["-DEXTRA=1.0f", "-std=c++20"]).build(fam.baseline()).modules["n=1024"]
    assert not std.cached and "--std" not in std.log and std.sass_sha256 == base.sass_sha256
    fam.nvrtc_options = ()
    with pytest.raises(BuildError, match="execution space"):
        Builder(fam, [G], ARCH, nvrtc_options=["-DEXTRA=1.0f"]).build(fam.baseline())
    with pytest.raises(BuildError, match=r"include folder nowhere \(the campaign's include_dirs\) is not a folder"):
        Builder(fam, [G], ARCH, include_dirs=["nowhere"])


def test_fields_set_as_class_attributes_are_the_familys(tmp_path, cache, monkeypatch):
    """docs/extending.md writes include_dirs, nvrtc_options, knobs and entry as class attributes: the dataclass's
    __init__ used to put each back to its default, so the kernel was built without them and nothing said so."""
    (tmp_path / "fams" / "inc").mkdir(parents=True)
    (tmp_path / "fams" / "inc" / "extra.cuh").write_text("#define EXTRA_OFFSET 1.0f\n")
    folder = write_family(tmp_path / "fams", "attrs", PLAIN_KERNEL, "tiny")
    text = (folder / "family.py").read_text()
    head, ctor = text.split("FAMILY = ")
    attrs = (
        "    entry = 'tiny'\n    knobs = (Knob('block', (128, 256), 256),)\n"
        "    include_dirs = ('../inc',)\n    nvrtc_options = ('-DUNUSED_FLAG=1',)\n\n"
    )
    head = head.replace("class Tiny(Family):\n", "class Tiny(Family):\n" + attrs)
    (folder / "family.py").write_text(head + "FAMILY = Tiny(geometry_params=(GeometryParam('n', int),))\n")
    fam = load_family("attrs", tmp_path / "fams")
    assert fam.include_dirs == ("../inc",) and fam.nvrtc_options == ("-DUNUSED_FLAG=1",)
    assert fam.entry == "tiny" and fam.baseline()["block"] == 256
    builder = Builder(fam, [G], ARCH)
    assert "-DUNUSED_FLAG=1" in builder.nvrtc_options
    assert builder.build(fam.baseline()).modules["n=1024"].resources.registers > 0  # extra.cuh found via ../inc
    (folder / "family.py").write_text((folder / "family.py").read_text().replace("'-DUNUSED_FLAG=1'", "'--bogus-flag'"))
    with pytest.raises(BuildError, match="bogus"):
        Builder(fam := load_family("attrs", tmp_path / "fams"), [G], ARCH).build(fam.baseline())
    monkeypatch.setenv("HOME", str(tmp_path / "fams"))  # ~ in include_dirs is the user's home, at load and build
    (folder / "family.py").write_text((folder / "family.py").read_text().replace("'../inc'", "'~/inc'"))
    fam = load_family("attrs", tmp_path / "fams")
    assert fam.include_dirs == ("~/inc",) and Builder(fam, [G], ARCH)._local[-1] == str(
        (tmp_path / "fams" / "inc").resolve()
    )
    given = type(fam)(include_dirs=("elsewhere",))  # a value given to the constructor wins
    assert given.include_dirs == ("elsewhere",) and given.nvrtc_options == ("--bogus-flag",)


def test_family_attributes_default_to_none():
    fam = load_family("mhc_pre_big_fuse")
    assert fam.include_dirs == () and fam.nvrtc_options == () and fam.template_knobs == ()
    fam.check_entry()
    assert fam.entry_expression(fam.baseline(), {"S": 1, "prenorm": False}) == fam.entry


def test_knob_values_that_are_not_words_still_make_macro_names(tmp_path):
    from evo.core.family import Family

    class Modes(Family):
        outputs = make_inputs = reference = launch = kernel_args = None

    fam = Modes(name="modes", entry="k<{mode}>", knobs=(Knob("mode", ("Mode::kFast", "unsigned int"), "Mode::kFast"),))
    assert fam.value_macros() == {"EVO_MODE_MODE__KFAST": 0, "EVO_MODE_UNSIGNED_INT": 1}
    assert fam.defines(fam.baseline(), {}) == {"EVO_MODE": "EVO_MODE_MODE__KFAST"}
    assert fam.entry_expression(fam.baseline(), {}) == "k<Mode::kFast>"
