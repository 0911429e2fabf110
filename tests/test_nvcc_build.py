"""Engine kernels as engines write them, through the nvcc route (harness/nvcc.py, harness/route.py): a header-only
library with host C++ in its headers, a template entry, a torch-extension .cu; errors in one line; the cache keyed by
every file the compiler read; auto's one decision; hints that name the remedy. nvcc -cubin needs no GPU.

The fixtures are written here in the style of FlashInfer's and vLLM's sources, not copied from them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cupy")

import harness.build as hb  # noqa: E402
from evo.core.family import Geometry, load_family  # noqa: E402
from harness.build import Builder, BuildError, compile_program, nvrtc_hint  # noqa: E402
from harness.nvcc import NvccIncludes, compile_nvcc, entry_symbol, find_nvcc, read_deps  # noqa: E402

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here (a CUDA toolkit or nvidia-cuda-nvcc)")
ARCH = "sm_90"
G = Geometry("n1024", {"n": 1024})

# A header-only kernel library as FlashInfer's are: host C++ (iostream, vector, exceptions), a host launcher, a
# constexpr helper called from device code (hence the engine's --expt-relaxed-constexpr), kernels in a namespace.
LIB_HEADER = """\
#pragma once
#include <iostream>
#include <vector>
#include <stdexcept>
#include <type_traits>

namespace mylib {

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

template <int BLOCK, int VEC, int PAD>
__global__ void __launch_bounds__(BLOCK) scale_kernel(float* __restrict__ x, float a, int n) {
  static_assert(std::is_same<decltype(a), float>::value, "float");
  const int per = ceil_div(n, BLOCK * VEC);
  for (int j = 0; j < per; ++j) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      int i = (j * BLOCK + threadIdx.x) * VEC + v;
      if (i < n) x[i] = x[i] * a + SCALE_BIAS;
    }
  }
}

inline void scale(float* x, float a, int n, int block) {
  if (n <= 0) throw std::invalid_argument("n must be positive");
  std::vector<int> blocks{128, 256};
  if (block == 128) scale_kernel<128, 2, 0><<<1, 128>>>(x, a, n);
  else std::cerr << "unsupported block " << block << std::endl;
}

}  // namespace mylib
"""

KERNEL_CU = '#include "mylib/scale.cuh"\n'  # the engine's file, unchanged: the kernel is the library's

FAMILY_PY = """
from evo.core.family import Family, GeometryParam, Knob, Launch


class Lib(Family):
    def outputs(self, geometry):
        return []

    def make_inputs(self, geometry, seed, device):
        return {}

    def reference(self, inputs, geometry, dtype=None):
        return {}

    def launch(self, genome, geometry):
        return Launch((1, 1, 1), (genome["block"], 1, 1))

    def kernel_args(self, inputs, outputs, geometry):
        return []


FAMILY = Lib(entry=ENTRY, knobs=(Knob("block", (128, 256), 128), Knob("pad", (0, 1), 0)),
             geometry_params=(GeometryParam("n", int),), include_dirs=("include",), EXTRA)
"""


def write_family(root: Path, *, header: str = LIB_HEADER, kernel: str = KERNEL_CU, extra: str = "", entry=None):
    folder = root / "lib"
    (folder / "include" / "mylib").mkdir(parents=True)
    entry = entry or "mylib::scale_kernel<{block}, 4, {pad}>"
    text = FAMILY_PY.replace("ENTRY", repr(entry)).replace("EXTRA", extra or "compiler='auto'")
    (folder / "family.py").write_text(text)
    (folder / "kernel.cu").write_text(kernel)
    (folder / "include" / "mylib" / "scale.cuh").write_text(header)
    (folder / "include" / "bias.h").write_text("#pragma once\n#define SCALE_BIAS 1.0f\n")
    return folder


ENGINE_OPTS = ("--expt-relaxed-constexpr", "-include", "include/bias.h")  # the engine's build flags
ENGINE = f"compile_options={ENGINE_OPTS!r}"


@pytest.fixture
def cache(monkeypatch, tmp_path):
    d = tmp_path / "cache"
    monkeypatch.setenv("EVO_CACHE_DIR", str(d))
    return d


def _builder(tmp_path, **kw) -> Builder:
    fam = load_family("lib", tmp_path / "fams")
    return Builder(fam, [G], ARCH, **kw)


# ---------------------------------------------------------------------------
# The header-only library with host C++


def test_nvrtc_cannot_compile_the_library_and_says_compile_with_nvcc(tmp_path, cache):
    write_family(tmp_path / "fams", extra=f"compiler='nvrtc', {ENGINE}")
    with pytest.raises(BuildError) as e:
        _builder(tmp_path).build({"block": 128, "pad": 0})
    msg = str(e.value)
    assert "\n" not in msg
    assert "compile with nvcc: `build: {compiler: nvcc}`" in msg, msg
    assert "edit" not in msg and "cuda/std" not in msg  # the library's header is not the user's to edit


@needs_nvcc
def test_nvcc_builds_the_library_with_the_engines_flags_and_a_template_entry(tmp_path, cache):
    write_family(tmp_path / "fams", extra=f"compiler='nvcc', {ENGINE}")
    b = _builder(tmp_path)
    m = b.build({"block": 128, "pad": 0}).modules["default"]
    assert (m.compiler, b.compiler, b.route_note) == ("nvcc", "nvcc", "")
    assert m.function.startswith("_ZN5mylib12scale_kernelILi128ELi4ELi0EEEvPffi"), m.function
    assert m.resources.registers > 0 and m.resources.report == "ptxas"
    # the template's instantiation is hashed under the template's name (as on NVRTC's route): PAD changes
    # nothing in the code, so both genomes are one variant although their symbols differ
    other = b.build({"block": 128, "pad": 1}).modules["default"]
    assert other.function != m.function and other.sass_sha256 == m.sass_sha256
    assert b.build({"block": 256, "pad": 0}).sass_sha256 != m.sass_sha256
    # the engine's flag is what makes it compile: without --expt-relaxed-constexpr nvcc refuses ceil_div
    fam = load_family("lib", tmp_path / "fams")
    fam.compile_options = ("-include", "include/bias.h")
    with pytest.raises(BuildError, match=r"scale\.cuh\(\d+\): error: .*ceil_div"):
        Builder(fam, [G], ARCH).build({"block": 128, "pad": 0})


@needs_nvcc
def test_auto_takes_nvcc_for_the_library_and_says_so_once(tmp_path, cache):
    write_family(tmp_path / "fams", extra=ENGINE)
    b = _builder(tmp_path)
    assert (b.compiler, b.route_note) == (None, "")  # decided at the first build
    m = b.build({"block": 128, "pad": 0}).modules["default"]
    assert m.compiler == "nvcc" and b.compiler == "nvcc"
    note = b.route_note
    assert note.startswith("compiler: nvcc (auto: NVRTC cannot compile") and "\n" not in note, note
    assert b.build({"block": 256, "pad": 1}).modules["default"].compiler == "nvcc"
    assert b.route_note == note  # sticky: one decision per builder


DEVICE_ONLY_HEADER = """\
#pragma once
namespace mylib {
template <int BLOCK, int VEC, int PAD>
__global__ void scale_kernel(float* __restrict__ x, float a, int n) {
  int i = (blockIdx.x * BLOCK + threadIdx.x) * VEC;
  if (i < n) x[i] = x[i] * a + SCALE_BIAS;
}
}  // namespace mylib
"""


def test_auto_keeps_nvrtc_where_nvrtc_compiles(tmp_path, cache):
    write_family(tmp_path / "fams", header=DEVICE_ONLY_HEADER)
    b = _builder(tmp_path, compile_options=["-DSCALE_BIAS=1.0f"])
    m = b.build({"block": 128, "pad": 0}).modules["default"]
    assert (m.compiler, b.compiler) == ("nvrtc", "nvrtc")
    assert b.route_note == "compiler: nvrtc (auto: NVRTC compiles it)"


@needs_nvcc
def test_auto_stays_undecided_while_both_compilers_fail_on_the_kernel_itself(tmp_path, cache):
    folder = write_family(tmp_path / "fams", header=DEVICE_ONLY_HEADER.replace("x[i] * a", "x[i] * oops"))
    b = _builder(tmp_path, compile_options=["-DSCALE_BIAS=1.0f"])
    with pytest.raises(BuildError, match=r'scale\.cuh\(6\): error: identifier "oops" is undefined'):
        b.build({"block": 128, "pad": 0})
    assert (b.compiler, b.route_note) == (None, "")  # NVRTC's error is the kernel's: nothing decided
    (folder / "include" / "mylib" / "scale.cuh").write_text(DEVICE_ONLY_HEADER)
    assert b.build({"block": 128, "pad": 0}).modules["default"].compiler == "nvrtc" == b.compiler


@needs_nvcc
def test_an_nvcc_error_never_names_the_deleted_scratch_file():
    """Issue 45: an error in the lines before ``#line 1 "kernel.cu"`` (a knob's macro) was named after nvcc's
    scratch copy (/tmp/evo-nvcc-xxxx/kernel.cu(2)), deleted before the message is read, in the verdict and log."""
    src = '#define EVO_BLOCK 1 +\nint a = EVO_BLOCK;\n#line 1 "kernel.cu"\n__global__ void k() {}\n'
    with pytest.raises(BuildError) as e:
        compile_nvcc(src, "k", ARCH, [], NvccIncludes())
    assert str(e.value).startswith("compile error: evo_prelude(2): error: expected an expression"), str(e.value)
    assert "knob value" in str(e.value)
    assert "evo-nvcc-" not in str(e.value) + e.value.log and "/tmp" not in e.value.log, e.value.log


@needs_nvcc
def test_a_compile_error_under_nvcc_is_one_line_with_file_and_line(tmp_path, cache):
    write_family(tmp_path / "fams", header=LIB_HEADER.replace("x[i] * a", "x[i] * undeclared_b"))
    fam = load_family("lib", tmp_path / "fams")
    with pytest.raises(BuildError) as e:
        Builder(fam, [G], ARCH, compiler="nvcc", compile_options=ENGINE_OPTS).build({"block": 128, "pad": 0})
    msg = str(e.value)
    assert "\n" not in msg
    assert 'mylib/scale.cuh(19): error: identifier "undeclared_b" is undefined' in msg, msg
    # a header nvcc cannot find either: the preprocessor's file:line
    (tmp_path / "fams" / "lib" / "kernel.cu").write_text('#include "mylib/missing.cuh"\n')
    with pytest.raises(BuildError, match=r"kernel\.cu:1:10: fatal error: mylib/missing\.cuh"):
        Builder(fam, [G], ARCH, compiler="nvcc").build({"block": 128, "pad": 0})
    (tmp_path / "fams" / "lib" / "kernel.cu").write_text("#include <torch/all.h>\n")  # torch's, not asked for
    with pytest.raises(
        BuildError, match=r"torch/all\.h: No such file.*\(torch's headers: `build: \{torch_headers: true\}`\)"
    ):
        Builder(fam, [G], ARCH, compiler="nvcc").build({"block": 128, "pad": 0})


@needs_nvcc
def test_an_entry_that_is_not_in_the_source_is_named(tmp_path, cache):
    write_family(tmp_path / "fams", extra=f"compiler='nvcc', {ENGINE}", entry="mylib::no_such<{block}>")
    with pytest.raises(BuildError, match=r"the entry 'mylib::no_such<128>': not a __global__ function"):
        _builder(tmp_path).build({"block": 128, "pad": 0})


# ---------------------------------------------------------------------------
# The cache key is what the compiler read


@needs_nvcc
def test_nvcc_cache_follows_headers_and_pre_included_files(tmp_path, cache):
    folder = write_family(tmp_path / "fams", extra=f"compiler='nvcc', {ENGINE}")
    g = {"block": 128, "pad": 0}
    first = _builder(tmp_path).build(g).modules["default"]
    again = _builder(tmp_path).build(g).modules["default"]
    assert not first.cached and again.cached and again.function == first.function
    # a header of the library changed: the manifest's result no longer holds
    hdr = folder / "include" / "mylib" / "scale.cuh"
    hdr.write_text(hdr.read_text().replace("x[i] * a + SCALE_BIAS", "x[i] * a - SCALE_BIAS"))
    changed = _builder(tmp_path).build(g).modules["default"]
    assert not changed.cached and changed.cubin_sha256 != first.cubin_sha256
    # the file -include names (read by nvcc, named by no #include): an #error there fails the next build
    with (folder / "include" / "bias.h").open("a") as f:
        f.write("#error bias changed\n")
    with pytest.raises(BuildError, match=r"bias\.h.*#error bias changed"):
        _builder(tmp_path).build(g)


def test_nvrtc_cache_follows_a_pre_included_header(tmp_path, cache):
    """Issue #40 item 7: an #error appended to a --pre-include header passed from the cache."""
    folder = tmp_path / "fams" / "pre"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] *= PRE_SCALE; }\n')
    (folder / "pre.h").write_text('#pragma once\n#include "pre_sub.h"\n#define PRE_SCALE PRE_SUB\n')
    (folder / "pre_sub.h").write_text("#pragma once\n#define PRE_SUB 2.0f\n")
    (folder / "family.py").write_text(
        FAMILY_PY.replace("ENTRY", "'k'")
        .replace('include_dirs=("include",), EXTRA', "nvrtc_options=OPTS")
        .replace("OPTS", "('--pre-include=pre.h',)")
    )
    fam = load_family("pre", tmp_path / "fams")
    g = {"block": 128, "pad": 0}
    assert not Builder(fam, [G], ARCH, compiler="nvrtc").build(g).modules["default"].cached
    assert Builder(fam, [G], ARCH, compiler="nvrtc").build(g).modules["default"].cached
    with (folder / "pre.h").open("a") as f:  # the pre-included file itself
        f.write("#define PRE_UNUSED 1\n")
    assert not Builder(fam, [G], ARCH, compiler="nvrtc").build(g).modules["default"].cached
    with (folder / "pre_sub.h").open("a") as f:  # what the pre-included file includes counts too
        f.write("#error pre_sub changed\n")
    with pytest.raises(BuildError, match=r"pre_sub\.h.*#error"):
        Builder(fam, [G], ARCH, compiler="nvrtc").build(g)


# ---------------------------------------------------------------------------
# Both routes alike


EXTERN_C = """\
extern "C" __global__ void __launch_bounds__(256) axpy(float* __restrict__ y, const float* __restrict__ x, float a,
                                                      int n) {
  float acc = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    acc += a * x[i] * x[(i * 7) % n];
    y[i] = acc + y[i];
  }
}
"""


@needs_nvcc
def test_an_extern_c_kernel_has_the_same_resources_on_both_routes(tmp_path, cache):
    folder = tmp_path / "fams" / "axpy"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(EXTERN_C)
    (folder / "family.py").write_text(
        FAMILY_PY.replace("ENTRY", "'axpy'").replace('include_dirs=("include",), EXTRA', "compiler='auto'")
    )
    fam = load_family("axpy", tmp_path / "fams")
    g = {"block": 128, "pad": 0}
    via_nvrtc = Builder(fam, [G], ARCH, compiler="nvrtc").build(g).modules["default"]
    via_nvcc = Builder(fam, [G], ARCH, compiler="nvcc").build(g).modules["default"]
    assert (via_nvrtc.compiler, via_nvcc.compiler) == ("nvrtc", "nvcc")
    assert via_nvrtc.function == via_nvcc.function == "axpy"
    assert via_nvcc.resources.registers == via_nvrtc.resources.registers > 0
    assert via_nvcc.resources.stack_frame == via_nvrtc.resources.stack_frame
    assert via_nvcc.source_sha256 == via_nvrtc.source_sha256  # the same source: one identity


@needs_nvcc
def test_entry_symbols_in_namespaces_anonymous_namespaces_and_extern_c(tmp_path):
    src = textwrap.dedent("""\
        namespace eng { namespace detail {
        template <int B> __global__ void k(float* x) { x[threadIdx.x] += B; }
        } }
        namespace { template <int B> __global__ void hidden(float* x) { x[threadIdx.x] *= B; } }
        extern "C" __global__ void plain(float* x) { x[0] = 1.f; }
        """)
    inc = hb_nvcc_includes()
    assert compile_nvcc(src, "eng::detail::k<64>", ARCH, (), inc).function == "_ZN3eng6detail1kILi64EEEvPf"
    anon = compile_nvcc(src, "hidden<8>", ARCH, (), inc).function
    assert "_GLOBAL__N_" in anon and anon.endswith("6hiddenILi8EEEvPf"), anon
    c = compile_nvcc(src, "plain", ARCH, (), inc)
    assert c.function == "plain" and entry_symbol(c.cubin) == "plain"
    assert hb.parse_ptxas_report(c.log, "plain").registers > 0


def hb_nvcc_includes():
    from harness.nvcc import NvccIncludes

    return NvccIncludes()


@needs_nvcc
def test_a_hung_nvcc_is_a_build_error(tmp_path, monkeypatch):
    monkeypatch.setenv("EVO_NVCC_TIMEOUT", "0.05")
    with pytest.raises(BuildError, match=r"nvcc did not finish in 0 s \(EVO_NVCC_TIMEOUT\)"):
        compile_nvcc(EXTERN_C, "axpy", ARCH, (), hb_nvcc_includes())


def test_read_deps_reads_make_rules(tmp_path):
    text = "out.cubin : /a/k.cu \\\n    /usr/include/x.h \\\n  rel/y.h /sp\\ ace/z.h\n"
    assert read_deps(text, "/w", exclude=Path("/a/k.cu")) == ("/usr/include/x.h", "/w/rel/y.h", "/sp ace/z.h")


# ---------------------------------------------------------------------------
# Options, config and family fields


def test_options_evo_needs_are_refused_in_one_line(tmp_path, cache):
    write_family(tmp_path / "fams")
    for opt, why in [
        ("-arch=sm_80", "target"),
        ("-o", "cubin of its own"),
        ("-rdc=true", "whole-program"),
        ("-MD", "dependency list"),
        ("-Ifoo", "include_dirs"),
    ]:
        with pytest.raises(BuildError, match=f"compile option '{opt}' is not allowed: .*{why}"):
            _builder(tmp_path, compile_options=[opt])
    with pytest.raises(BuildError, match="compiler 'gcc': one of auto, nvrtc, nvcc"):
        _builder(tmp_path, compiler="gcc")
    with pytest.raises(BuildError, match="torch_headers needs nvcc"):
        _builder(tmp_path, compiler="nvrtc", torch_headers=True)


def test_config_build_keys(tmp_path):
    from evo.config import ConfigError, _build

    cfg = tmp_path / "c.yaml"
    b = _build({"compiler": "nvcc", "compile_options": ["-use_fast_math"], "torch_headers": True}, cfg)
    assert (b.compiler, b.compile_options, b.torch_headers) == ("nvcc", ("-use_fast_math",), True)
    assert _build(None, cfg).compiler is None and _build(None, cfg).torch_headers is None  # the family's
    for raw, msg in [
        ({"compiler": "clang"}, "build.compiler: 'clang' is not one of auto, nvrtc, nvcc"),
        ({"torch_headers": "yes"}, "build.torch_headers: expected true or false"),
        ({"compile_options": "-O3"}, "build.compile_options: expected a list of strings"),
        ({"compiler": "nvrtc", "torch_headers": True}, "build.torch_headers needs nvcc"),
    ]:
        with pytest.raises(ConfigError, match=msg.replace("(", r"\(")):
            _build(raw, cfg)


def test_family_compiler_field_is_checked(tmp_path):
    from evo.core.family import FamilyError

    write_family(tmp_path / "fams", extra="compiler='clang'")
    with pytest.raises(FamilyError, match="compiler is 'clang': one of auto, nvrtc, nvcc"):
        load_family("lib", tmp_path / "fams")


def test_config_wins_over_the_family(tmp_path, cache):
    from types import SimpleNamespace

    write_family(tmp_path / "fams", extra=f"compiler='nvcc', {ENGINE}")
    fam = load_family("lib", tmp_path / "fams")
    build = SimpleNamespace(
        include_dirs=(), nvrtc_options=(), compiler="nvrtc", compile_options=("-DX=1",), torch_headers=None
    )
    cfg = SimpleNamespace(family=fam, geometries=[G], arch=ARCH, build_defines={}, build=build)
    b = Builder.for_config(cfg)
    assert (
        b.requested == "nvrtc"
        and b.compile_options[-1] == "-DX=1"
        and b.compile_options[0] == "--expt-relaxed-constexpr"
    )


# ---------------------------------------------------------------------------
# Hints that name the remedy


def _nvrtc_error(tmp_path, kernel: str) -> str:
    with pytest.raises(BuildError) as e:
        compile_program(kernel, "k", ARCH, [*hb.cuda_include_options(), f"-I{tmp_path}"], str(tmp_path / "kernel.cu"))
    return str(e.value)


def test_hints_name_nvcc_first_and_never_an_edit_of_the_engines_headers(tmp_path):
    (tmp_path / "engine.cuh").write_text("#pragma once\n#include <assert.h>\n#include <numeric>\n")
    msg = _nvrtc_error(tmp_path, '#include "engine.cuh"\nextern "C" __global__ void k() {}\n')
    assert "compile with nvcc: `build: {compiler: nvcc}`" in msg and "cuda/std" not in msg, msg
    # kernel.cu's own include of a header CCCL has: nvcc first, <cuda/std/X> as the other way
    msg = _nvrtc_error(tmp_path, '#include <type_traits>\nextern "C" __global__ void k() {}\n')
    assert msg.index("compile with nvcc") < msg.index("#include <cuda/std/type_traits>"), msg
    # one CCCL does not have here is never suggested
    if not any((Path(d) / "cuda" / "std" / "algorithm").is_file() for d in hb.cuda_include_dirs()):
        msg = _nvrtc_error(tmp_path, '#include <algorithm>\nextern "C" __global__ void k() {}\n')
        assert "compile with nvcc" in msg and "cuda/std/algorithm" not in msg, msg
    assert "torch_headers: true" in nvrtc_hint(
        'kernel.cu(1): catastrophic error: cannot open source file "torch/all.h"'
    )
    hint = nvrtc_hint("nvrtc: error: unrecognized option --expt-relaxed-constexpr found")
    assert "compile with nvcc" in hint
    assert "include_dirs" in nvrtc_hint('kernel.cu(1): catastrophic error: cannot open source file "mylib/x.cuh"')


# ---------------------------------------------------------------------------
# A torch-extension .cu (slow: ~30 s of torch's headers on a 2-core machine)

TORCH_EXT = """\
#include <torch/all.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

namespace myeng {

// in place: input <- normalized(input + residual), residual <- input + residual; block size chosen at launch
template <typename scalar_t>
__global__ void fused_add_rms_kernel(scalar_t* __restrict__ input, scalar_t* __restrict__ residual,
                                     const scalar_t* __restrict__ weight, float eps, int hidden) {
  __shared__ float partial[32];
  float sum = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = float(input[blockIdx.x * hidden + i]) + float(residual[blockIdx.x * hidden + i]);
    residual[blockIdx.x * hidden + i] = scalar_t(v);
    sum += v * v;
  }
  if (threadIdx.x < 32) partial[threadIdx.x] = 0.f;
  __syncthreads();
  atomicAdd(&partial[threadIdx.x % 32], sum);
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < 32; ++w) total += partial[w];
  const float inv = rsqrtf(total / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    input[blockIdx.x * hidden + i] = scalar_t(float(residual[blockIdx.x * hidden + i]) * inv * float(weight[i]));
}

}  // namespace myeng

void fused_add_rms(torch::Tensor& input, torch::Tensor& residual, torch::Tensor& weight, double eps) {
  TORCH_CHECK(input.is_contiguous(), "input must be contiguous");
  const int hidden = input.size(-1);
  const int tokens = input.numel() / hidden;
  dim3 grid(tokens), block(std::min(hidden, 1024));
  const at::cuda::OptionalCUDAGuard guard(device_of(input));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  myeng::fused_add_rms_kernel<float><<<grid, block, 0, stream>>>(
      input.data_ptr<float>(), residual.data_ptr<float>(), weight.data_ptr<float>(), eps, hidden);
}
"""


@pytest.mark.slow
@needs_nvcc
def test_a_torch_extension_cu_compiles_to_a_cubin_with_torch_headers(tmp_path, cache):
    pytest.importorskip("torch")
    folder = tmp_path / "fams" / "ext"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(TORCH_EXT)
    (folder / "family.py").write_text(
        FAMILY_PY.replace("ENTRY", "'myeng::fused_add_rms_kernel<float>'").replace(
            'include_dirs=("include",), EXTRA', "torch_headers=True"
        )
    )
    fam = load_family("ext", tmp_path / "fams")
    b = Builder(fam, [G], ARCH)  # auto: torch's headers need nvcc
    m = b.build({"block": 128, "pad": 0}).modules["default"]
    assert m.compiler == "nvcc" and b.route_note.startswith("compiler: nvcc (auto: torch_headers is on")
    assert m.function == "_ZN5myeng20fused_add_rms_kernelIfEEvPT_S2_PKS1_fi", m.function
    assert m.resources.registers > 0 and Path(m.cubin_path).read_bytes()[:4] == b"\x7fELF"
    meta = __import__("json").loads(Path(m.cubin_path).with_suffix(".json").read_text())
    assert any(p.endswith("c10/cuda/impl/cuda_cmake_macros.h") for p in meta["deps"])  # evo's stand-in was read
    again = Builder(fam, [G], ARCH).build({"block": 128, "pad": 0}).modules["default"]  # another process, say
    assert again.cached and again.function == m.function and again.compiler == "nvcc"
