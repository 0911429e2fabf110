"""`evo new --kernel FILE --entry NAME`: the kernel chosen by name among a file's, read whatever the order of
``template``, ``__launch_bounds__``, ``__global__`` and the return type, inside namespaces; the include root found
above the kernel; the "engine" block knob written, commented, into the stub of a kernel that reads blockDim.

Every fixture is written here, in the style of engine headers (a multi-kernel norm header, a SFINAE pair of
kernels, a torch-extension-style .cu); none is copied from an engine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evo.kernel_source import read_entries, tokenize
from evo.scaffold import ScaffoldError, new_family

ROOT = Path(__file__).resolve().parents[1]


def evo(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run([sys.executable, "-m", "evo", *args], cwd=cwd, env=env, capture_output=True, text=True)


# a header-only library's norm header: several kernels, specifiers in every order engines use
NORM_HEADER = textwrap.dedent("""\
    #pragma once
    #include <cstdint>
    #include <cuda_bf16.h>
    #include "mylib/utils.cuh"   // from the include root, two folders up
    #include "vec.cuh"           // beside this header

    namespace mylib {
    namespace norm {

    /* __global__ void commented_out(float* x) {} */
    static const char* kName = "__global__ void in_a_string(float* x)";

    template <uint32_t VEC_SIZE, typename T = float>
    __global__ void RMSNormKernel(T* __restrict__ out, const T* __restrict__ in, float eps, uint32_t d) {
      const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < d) out[i] = mylib::scale(in[i], eps);
    }

    template <uint32_t VEC_SIZE = 8, typename T = float, int kWarps = 4>
    __global__ void __launch_bounds__(kWarps * 32) FusedAddRMSNormKernel(T* input, T* residual, const T* w,
                                                                        uint32_t d, float eps) {
      if (threadIdx.x < d) residual[threadIdx.x] += input[threadIdx.x] * w[0] * eps;
    }

    template <int kBlock = 256, bool kSqrsum = false>
    __launch_bounds__(kBlock) __global__ void PreFuseKernel(const float* partial, float* out, int n) {
      if (kSqrsum && threadIdx.x < n) out[threadIdx.x] = partial[threadIdx.x];
    }

    #if 0
    __global__ void DisabledKernel(float* x) {}
    #else
    template <int kThreads = 128>
    static __global__ __launch_bounds__(MYLIB_BOUNDS(kThreads, (2))) void StaticKernel(float* x) {}
    #endif

    }  // namespace norm
    }  // namespace mylib
    """)

SFINAE_KERNELS = textwrap.dedent("""\
    namespace eng {
    template <typename scalar_t, int width = 8>
    __global__ std::enable_if_t<(width > 0) && is_half<scalar_t>::value>
    fused_add_norm(scalar_t* __restrict__ x, const int64_t stride, scalar_t* __restrict__ res, int hidden) {
      for (int i = threadIdx.x; i < hidden; i += blockDim.x) res[i] += x[i * stride];
    }
    template <typename scalar_t, int width = 8>
    __global__ std::enable_if_t<(width == 0) || !is_half<scalar_t>::value>
    fused_add_norm(scalar_t* __restrict__ x, const int64_t stride, scalar_t* __restrict__ res, int hidden) {
      for (int i = threadIdx.x; i < hidden; i += blockDim.x) res[i] += x[i * stride];
    }
    template <typename T, typename = void>
    __global__ typename std::enable_if<sizeof(T) == 2>::type halves_only(T* x) {}
    }  // namespace eng
    """)


def test_every_kernel_of_a_header_is_read_whatever_the_order_of_its_specifiers():
    entries = read_entries(NORM_HEADER)
    assert [e.name for e in entries] == [
        "mylib::norm::RMSNormKernel",
        "mylib::norm::FusedAddRMSNormKernel",
        "mylib::norm::PreFuseKernel",
        "mylib::norm::StaticKernel",
    ]  # not the ones in a comment, a string or #if 0
    rms, fused, pre, static = entries
    assert rms.template == (("uint32_t", "VEC_SIZE", None), ("typename", "T", "float"))
    assert fused.expression() == "mylib::norm::FusedAddRMSNormKernel<{vec_size}, {t}, {k_warps}>"
    assert pre.template == (("int", "kBlock", "256"), ("bool", "kSqrsum", "false"))  # __launch_bounds__ first
    assert pre.params == "const float* partial, float* out, int n"
    assert static.template == (("int", "kThreads", "128"),) and static.params == "float* x"
    assert rms.reads_block_dim and not fused.reads_block_dim


def test_kernels_returning_enable_if_are_read_with_their_template_parameters():
    a, b, c = read_entries(SFINAE_KERNELS)
    assert a.name == b.name == "eng::fused_add_norm"  # two overloads of one kernel
    assert a.template == (("typename", "scalar_t", None), ("int", "width", "8"))
    assert a.returns == "std::enable_if_t<(width > 0) && is_half<scalar_t>::value>"
    assert a.params == "scalar_t* __restrict__ x, const int64_t stride, scalar_t* __restrict__ res, int hidden"
    assert a.reads_block_dim
    assert c.name == "eng::halves_only" and c.returns == "typename std::enable_if<sizeof(T) == 2>::type"
    assert c.expression() == "eng::halves_only<{t}>"  # the unnamed `typename = void` keeps its default


def test_namespaces_nested_qualified_anonymous_and_extern_c():
    src = textwrap.dedent("""\
        namespace outer::inner {
        namespace {
        struct Params { int n; };
        __device__ int helper() { return 1; }
        }  // anonymous
        inline namespace v2 { __global__ void versioned(int n) {} }
        template <class V = Vec<Pack<float>, 4>> __global__ void k(Params p) { }
        }
        extern "C" { __global__ void flat(float* x) {} }
        namespace alias = outer::inner;
        __global__ void global_scope(int) {}
        """)
    names = [(e.name, e.extern_c) for e in read_entries(src)]
    assert names == [
        ("outer::inner::v2::versioned", False),
        ("outer::inner::k", False),
        ("flat", True),
        ("global_scope", False),
    ]
    k = read_entries(src)[1]
    assert k.template == (("class", "V", "Vec<Pack<float>, 4>"),) and k.expression() == "outer::inner::k<{v}>"


def test_if_0_else_comments_strings_and_raw_strings_hide_no_kernel_and_fake_none():
    src = textwrap.dedent("""\
        // __global__ void c1(int);
        const char* s = "}}} __global__ void s1(int) {";
        const char* r = R"x(__global__ void r1(int) { )x";
        char q = '{';
        #if 0
        #if FOO
        __global__ void nested_dead(int) {}
        #endif
        __global__ void dead(int) {}
        #elif BAR
        __global__ void live_elif(int) {}
        #endif
        #if 1
        __global__ void live_one(int) {}
        #else
        __global__ void dead_else(int) {}
        #endif
        #define KERNEL(n) __global__ void n(int)
        __global__ void last(int a,
        #ifdef HAS_B
                             int b,
        #endif
                             int c) {}
        """)
    entries = read_entries(src)
    assert [e.name for e in entries] == ["live_elif", "live_one", "last"]
    assert "#ifdef HAS_B" in entries[-1].params  # kept: a reader cannot count that list
    (cut,) = read_entries("namespace a { template <int B> __global__ void k(int n) { if (n) { blockDim.x;")
    assert cut.name == "a::k" and cut.reads_block_dim  # a file cut off inside a kernel's body


def _big_source(kernels: int) -> str:
    """A generated source of about 2 MB: kernels in namespaces, each among comments, strings, host code and
    dead #if 0 blocks that look like kernels."""
    parts = []
    for i in range(kernels):
        parts.append(
            f"namespace eng{i % 7} {{\n"
            f"// kernel {i}: __global__ void fake_{i}(int)\n"
            f'static const char* doc_{i} = "__global__ void nope_{i}(int) {{";\n'
            f"#if 0\n__global__ void dead_{i}(int) {{}}\n#endif\n"
            f"template <int BLOCK_{i} = {32 * (i % 32 + 1)}, typename T = float>\n"
            + (
                f"__launch_bounds__(BLOCK_{i}) __global__ void"
                if i % 2
                else f"__global__ void __launch_bounds__(BLOCK_{i})"
            )
            + f" k{i}(T* __restrict__ y, const T* x, int n) {{\n"
            f"  for (int j = threadIdx.x; j < n; j += BLOCK_{i}) {{ y[j] = x[j] < T(0) ? T(0) : x[j]; }}\n"
            f"}}\n"
            f"inline int host_{i}(int a) {{ return a < {i} ? a : {i}; }}\n"
            f"}}  // namespace eng{i % 7}\n"
        )
    return "".join(parts)


def test_a_two_megabyte_source_is_read_right():
    """One tokenizer pass and one pass over its tokens (no pattern that backtracks over the file): a big
    generated header reads right, every kernel with its namespace and template parameters."""
    n = 4000
    src = _big_source(n)
    assert len(src) > 1_500_000
    entries = read_entries(src)
    assert [e.name for e in entries] == [f"eng{i % 7}::k{i}" for i in range(n)]
    for i in (0, 1, 1234, n - 1):
        assert entries[i].template == (("int", f"BLOCK_{i}", str(32 * (i % 32 + 1))), ("typename", "T", "float"))
        assert entries[i].params == "T* __restrict__ y, const T* x, int n"
    assert len([t for t in tokenize(src) if t.text == "__global__"]) == n  # the dead ones dropped with their #if


# --- evo new --kernel FILE --entry NAME ---------------------------------------------------------------------


def _engine_tree(tmp_path: Path) -> Path:
    """A header library laid out as engines lay one out: include/mylib/norm.cuh includes "mylib/utils.cuh"
    (from include/, two folders above the header's own folder's files) and "vec.cuh" (beside it)."""
    inc = tmp_path / "engine" / "include" / "mylib"
    inc.mkdir(parents=True)
    (tmp_path / "engine" / ".git").mkdir()  # the repository's root: the search for a root stops there
    (inc / "norm.cuh").write_text(NORM_HEADER)
    (inc / "utils.cuh").write_text(
        '#pragma once\n#include "vec.cuh"\nnamespace mylib {\n'
        "template <typename T> __device__ __forceinline__ T scale(T v, float e) { return v * T(e); }\n}\n"
        "#define MYLIB_BOUNDS(t, m) t, m\n"
    )
    (inc / "vec.cuh").write_text("#pragma once\nnamespace mylib { template <int N> struct Vec { float v[N]; }; }\n")
    return inc / "norm.cuh"


@pytest.mark.parametrize(
    "entry, expect",
    [
        ("RMSNormKernel", 'entry="mylib::norm::RMSNormKernel<{vec_size}, {t}>"'),
        (
            "mylib::norm::FusedAddRMSNormKernel",
            'entry="mylib::norm::FusedAddRMSNormKernel<{vec_size}, {t}, {k_warps}>"',
        ),
        ("norm::PreFuseKernel<256, false>", 'entry="mylib::norm::PreFuseKernel<{k_block}, {k_sqrsum}>"'),
        ("::mylib::norm::StaticKernel", 'entry="mylib::norm::StaticKernel<{k_threads}>"'),
    ],
)
def test_entry_picks_each_kernel_of_a_header(tmp_path, entry, expect):
    header = _engine_tree(tmp_path)
    dest = new_family("mine", tmp_path, header, entry=entry)
    assert expect in (dest / "family.py").read_text()


def test_without_entry_a_file_of_several_kernels_is_one_line_naming_them(tmp_path):
    header = _engine_tree(tmp_path)
    r = evo(tmp_path, "new", "mine", "--kernel", str(header))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    line = r.stderr.strip()
    assert "has 4 kernels: mylib::norm::RMSNormKernel, mylib::norm::FusedAddRMSNormKernel, " in line
    assert "mylib::norm::StaticKernel" in line and "pass --entry NAME" in line
    assert not (tmp_path / "mine").exists()
    r = evo(tmp_path, "new", "mine", "--kernel", str(header), "--entry", "LayerNormKernel")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "--entry LayerNormKernel: no such __global__" in r.stderr and "mylib::norm::PreFuseKernel" in r.stderr
    r = evo(tmp_path, "new", "mine", "--entry", "RMSNormKernel")
    assert r.returncode == 2 and "give the file too" in r.stderr
    # the family named like one of the kernels chooses it; a file of one kernel (overloads count once) needs none
    dest = new_family("PreFuseKernel", tmp_path, header)
    assert 'entry="mylib::norm::PreFuseKernel<{k_block}, {k_sqrsum}>"' in (dest / "family.py").read_text()
    (tmp_path / "act.cu").write_text(SFINAE_KERNELS.split("template <typename T, typename = void>")[0] + "}\n")
    dest = new_family("act", tmp_path, tmp_path / "act.cu")
    assert 'entry="eng::fused_add_norm<{scalar_t}, {width}>"' in (dest / "family.py").read_text()
    with pytest.raises(ScaffoldError, match="names 2 kernels"):
        (tmp_path / "two.cu").write_text(
            "namespace a { __global__ void k(int) {} }\nnamespace b { __global__ void k(int) {} }\n"
        )
        new_family("two", tmp_path, tmp_path / "two.cu", entry="k")


def test_the_include_root_two_folders_up_goes_into_include_dirs_and_the_kernel_builds(tmp_path):
    """norm.cuh includes "mylib/utils.cuh": evo new named it "not beside your kernel" and wrote no include
    root; now include/ is found (and the header's own folder, for "vec.cuh"), and NVRTC builds the entry."""
    header = _engine_tree(tmp_path)
    r = evo(tmp_path, "new", "fused", "--kernel", str(header), "--entry", "FusedAddRMSNormKernel", "--link")
    assert r.returncode == 0, r.stderr
    assert "note: mylib/utils.cuh found from engine/include: it is in family.py's include_dirs" in r.stdout
    assert "note: vec.cuh beside your kernel" in r.stdout and "found nowhere" not in r.stdout, r.stdout
    fam_src = (tmp_path / "fused" / "family.py").read_text()
    assert '"../engine/include/mylib",  # the kernel\'s folder: vec.cuh' in fam_src
    assert '"../engine/include",  # an include root: mylib/utils.cuh' in fam_src
    from evo.core.family import load_family
    from harness.build import Builder

    fam = load_family(str(tmp_path / "fused"))
    built = Builder(fam, [], "sm_90").build(fam.baseline())
    assert all("FusedAddRMSNormKernel" in m.function for m in built.modules.values())


def test_a_torch_extension_style_cu_finds_its_header_in_the_parent_folder_and_names_what_it_cannot(tmp_path):
    csrc = tmp_path / "engine" / "csrc"
    (csrc / "mhc").mkdir(parents=True)
    (csrc / "ffi_utils.h").write_text('#pragma once\n#include "dlpack/dlpack.h"\n#include <engine/layout.cuh>\n')
    (tmp_path / "engine" / "include" / "engine").mkdir(parents=True)
    (tmp_path / "engine" / "include" / "engine" / "layout.cuh").write_text("#pragma once\n")
    (csrc / "mhc" / "pre.cu").write_text(
        '#include <cuda_bf16.h>\n#include "ffi_utils.h"\n#include "missing_config.h"\nnamespace engine::mhc {\n'
        "namespace {\ntemplate <int kSplits, int kBlock>\n__global__ void __launch_bounds__(kBlock) pre(float* y) {}\n"
        "}  // namespace\n}  // namespace engine::mhc\n"
    )
    r = evo(tmp_path, "new", "pre", "--kernel", "engine/csrc/mhc/pre.cu")
    assert r.returncode == 0, r.stderr
    fam_src = (tmp_path / "pre" / "family.py").read_text()
    assert 'entry="engine::mhc::pre<{k_splits}, {k_block}>"' in fam_src
    assert '"../engine/csrc",  # an include root: ffi_utils.h' in fam_src
    assert '"../engine/include",  # an include root: engine/layout.cuh' in fam_src  # an <...> of ffi_utils.h
    assert "note: ffi_utils.h found from engine/csrc" in r.stdout
    assert "note: missing_config.h, dlpack/dlpack.h (from ffi_utils.h) found nowhere near your kernel" in r.stdout


def test_a_kernel_that_reads_blockdim_gets_the_engine_block_knob_pattern(tmp_path):
    (tmp_path / "act.cu").write_text(SFINAE_KERNELS)
    dest = new_family("act", tmp_path, tmp_path / "act.cu", entry="fused_add_norm")
    fam_src = (dest / "family.py").read_text()
    assert '# Knob("block", ("engine", 128, 256, 512, 1024), "engine"' in fam_src
    assert 'if genome["block"] == "engine" else genome["block"]' in fam_src
    compile(fam_src, "family.py", "exec")  # still Python
    dest = new_family("halves", tmp_path, tmp_path / "act.cu", entry="halves_only")  # reads no blockDim
    assert '"engine"' not in (dest / "family.py").read_text()


def test_a_kernel_that_includes_torchs_headers_gets_torch_headers(tmp_path):
    """A vLLM-style csrc/*.cu includes <torch/cuda.h>, <c10/cuda/CUDAGuard.h> and a header of its own that includes
    <torch/all.h>: evo new wrote no torch_headers and evo check failed on torch/cuda.h; now family.py says
    torch_headers=True, the note names them, and none of them is "found nowhere"."""
    csrc = tmp_path / "engine" / "csrc"
    csrc.mkdir(parents=True)
    (csrc / "dispatch.h").write_text("#pragma once\n#include <torch/all.h>\n")
    (csrc / "norm.cu").write_text(
        '#include "dispatch.h"\n#include <torch/cuda.h>\n#include <c10/cuda/CUDAGuard.h>\n#include <cub/cub.cuh>\n'
        "namespace eng {\ntemplate <typename scalar_t>\n__global__ void norm(scalar_t* x, int n) {}\n}\n"
    )
    r = evo(tmp_path, "new", "norm", "--kernel", "engine/csrc/norm.cu")
    assert r.returncode == 0, r.stderr
    fam_src = (tmp_path / "norm" / "family.py").read_text()
    assert "    torch_headers=True,  # it includes torch/cuda.h, c10/cuda/CUDAGuard.h and 1 more:" in fam_src, fam_src
    compile(fam_src, "family.py", "exec")
    assert "note: torch/cuda.h, c10/cuda/CUDAGuard.h, torch/all.h are torch's headers" in r.stdout, r.stdout
    assert "found nowhere" not in r.stdout
    (tmp_path / "plain.cu").write_text("#include <cub/cub.cuh>\n__global__ void plain(float* x) {}\n")
    assert "torch_headers" not in (new_family("plain", tmp_path, tmp_path / "plain.cu") / "family.py").read_text()
