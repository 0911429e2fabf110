"""Kernel parameters as engines pass them (structs by value, doubles), read from the compiled cubin and held against
arg_types and kernel_args, by `evo check` on the CPU and by the GPU backend: a check that cannot pass silently."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from evo.check import run_check
from harness.build import compile_program, cuda_include_options
from harness.cubin import CubinError, Param, param_layout, read_param_layout
from harness.kernel_params import layout_problem, struct_bytes

# Every kind of parameter: a pointer, int, int64, float, double, char, uint3 by value, a 40-byte Params struct, and
# eight uint3 fast-division constants (as llama.cpp's rms_norm_f32 takes them).
ENGINE_KERNEL = r"""
struct Params {  // 40 B, as FlashInfer's Params structs are passed
  const float* x;
  float* y;
  int n;
  float eps;
  long long stride;
  int flags;
};
extern "C" __global__ void every_kind(float* p, int i, long long l, float f, double d, char c, uint3 u, Params P) {
  p[0] = i + l + f + d + c + u.x + u.y + u.z + P.n + P.eps;
}
template <int BLOCK>
__global__ void rms_norm_f32(const float* x, float* dst, int ncols, long long stride_row, const uint3 nchannels_packed,
                             const uint3 nsamples_packed, const uint3 nrows_packed, const uint3 a, const uint3 b,
                             const uint3 c, const uint3 d, const uint3 e, float eps) {
  dst[threadIdx.x] = x[0] + ncols + stride_row + nchannels_packed.x + nsamples_packed.y + nrows_packed.z + a.x + b.x
                     + c.x + d.x + e.x + eps + BLOCK;
}
"""
EVERY_KIND = [(0, 8), (8, 4), (16, 8), (24, 4), (32, 8), (40, 1), (44, 12), (56, 40)]  # (offset, size)
RMS_NORM = [(0, 8), (8, 8), (16, 4), (24, 8)] + [(32 + 12 * k, 12) for k in range(8)] + [(128, 4)]


def _nvrtc(entry: str) -> tuple[bytes, str]:
    c = compile_program(ENGINE_KERNEL, entry, "sm_90", cuda_include_options())
    return c.cubin, c.function


def _offsets(layout) -> list[tuple[int, int]]:
    return [(p.offset, p.size) for p in layout.params]


def test_the_layout_of_an_nvrtc_cubin():
    cubin, fn = _nvrtc("every_kind")
    layout = param_layout(cubin, fn)
    assert _offsets(layout) == EVERY_KIND and layout.total == 96
    assert [p.ordinal for p in layout.params] == list(range(8))
    cubin, fn = _nvrtc("rms_norm_f32<256>")  # a template's lowered (mangled) name
    layout = param_layout(cubin, fn)
    assert fn != "rms_norm_f32<256>" and _offsets(layout) == RMS_NORM and layout.total == 132


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_the_layout_of_an_nvcc_cubin_large_parameters_too(tmp_path):
    """nvcc's cubins hold the same records; past 4 KiB of parameters ptxas writes EIATTR_KPARAM_INFO_V2."""
    src = tmp_path / "k.cu"
    src.write_text(
        ENGINE_KERNEL
        + "struct Big { int v[1500]; };\n"
        + 'extern "C" __global__ void big(int* o, Big b, int n) { o[0] = b.v[1499] + n; }\n'
        + 'extern "C" __global__ void none() {}\n'
    )
    out = tmp_path / "k.cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(out), str(src)], check=True, capture_output=True)
    assert _offsets(read_param_layout(out, "every_kind")) == EVERY_KIND
    big = read_param_layout(out, "big")
    assert big.params == (Param(0, 0, 8), Param(1, 8, 6000), Param(2, 6008, 4)) and big.total == 6012
    assert read_param_layout(out, "none").params == ()  # no parameters: no records, and that is read as such
    with pytest.raises(CubinError, match="no .nv.info.nothere section"):
        read_param_layout(out, "nothere")


def test_a_cubin_that_cannot_say_is_an_error_never_a_guess():
    cubin, fn = _nvrtc("every_kind")
    with pytest.raises(CubinError, match="not an ELF64 cubin"):
        param_layout(b"PTX text", fn)
    at = cubin.index(b".nv.info.every_kind")  # the section's name: its records are no longer found by it
    with pytest.raises(CubinError, match="no .nv.info.every_kind section"):
        param_layout(cubin[:at] + b"X" + cubin[at + 1 :], fn)


class Dims(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint32), ("y", ctypes.c_uint32), ("z", ctypes.c_uint32)]


def test_what_an_s_argument_may_be():
    want = np.array([7, 8, 9], dtype=np.uint32).tobytes()
    dt = np.dtype([("x", "<u4"), ("y", "<u4"), ("z", "<u4")])
    for v in (want, bytearray(want), memoryview(want), np.array([7, 8, 9], np.uint32), Dims(7, 8, 9)):
        assert struct_bytes(v) == want
    assert struct_bytes(np.array((7, 8, 9), dtype=dt)[()]) == want  # a structured np.void
    assert struct_bytes(np.float16(1.0)) == b"\x00\x3c"  # a __half by value
    assert struct_bytes(7) is None and struct_bytes(1.5) is None and struct_bytes("abc") is None


def test_layout_problems_name_the_parameter_its_size_and_offset():
    cubin, fn = _nvrtc("every_kind")
    layout = param_layout(cubin, fn)
    assert layout_problem("pilfdsss", layout) is None  # s: sized by its value only
    assert "has 7 letters; every_kind takes 8 parameters (cubin: 8, 4, 8, 4, 8, 1, 12, 40 B)" in str(
        layout_problem("pilfdss", layout)
    )
    assert layout_problem("pildfsss", layout) == (
        "arg_types 'pildfsss': parameter 3 of every_kind is 4 B at offset 24 in the cubin; 'd' passes 8 B"
    )
    small = str(layout_problem("pilfdiss", layout))
    assert "parameter 5 of every_kind is 1 B at offset 40 in the cubin; 'i' passes 4 B" in small
    assert "takes 's' with a numpy scalar of its size" in small
    vals = [0, 1, 2, 3.0, 4.0, np.int8(5), np.zeros(3, np.uint32), np.zeros(10, np.uint32)]
    assert layout_problem("pilfdsss", layout, vals) is None
    vals[7] = np.zeros(9, np.uint32)
    assert layout_problem("pilfdsss", layout, vals) == (
        "arg_types 'pilfdsss': parameter 7 of every_kind is 40 B at offset 56 in the cubin; kernel_args[7] gives 36 B"
    )


def test_the_driver_launcher_packs_s_and_d_arguments():
    from harness.driver_launch import pack_args

    arr, holders = pack_args("pdsi", [0x1234, 2.5, np.array([7, 8, 9], np.uint32), 3])
    assert len(holders) == 4
    got = [ctypes.string_at(arr[k], n) for k, n in enumerate((8, 8, 12, 4))]
    assert got[1] == np.float64(2.5).tobytes() and got[2] == np.array([7, 8, 9], np.uint32).tobytes()
    assert int.from_bytes(got[0], "little") == 0x1234 and int.from_bytes(got[3], "little") == 3
    with pytest.raises(ValueError, match="no value to pass by value"):
        pack_args("s", [3])


# --- evo check: a family whose kernel the text reader cannot read ------------------------------------------------

# vLLM style: an enable_if_t return type; NVRTC has no <type_traits>, so CCCL's.
VLLM_STYLE = r"""
#include <cuda/std/type_traits>
struct Affine {  // 16 B by value
  float scale;
  float bias;
  int n;
  int pad;
};
template <typename scalar_t, int width>
__global__ cuda::std::enable_if_t<(width > 0)> scale_rows(scalar_t* __restrict__ out, const scalar_t* __restrict__ x,
                                                          ARGS) {
  const int row = blockIdx.x;
  for (int c = threadIdx.x * width; c < COLS; c += blockDim.x * width) {
    for (int j = 0; j < width && c + j < COLS; ++j) {
      const int i = row * COLS + c + j;
      out[i] = x[i] * SCALE + BIAS;
    }
  }
}
"""
STRUCTS = ("const uint3 dims, const Affine aff", "(int)dims.y", "aff.scale", "aff.bias + (float)dims.z")
SCALARS = ("float scale, int cols = int(0)", "cols", "scale", "0.0f")  # a default the text reader cannot count

FAMILY_PY = """
from __future__ import annotations

import numpy as np

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

AFFINE = np.dtype([("scale", "<f4"), ("bias", "<f4"), ("n", "<i4"), ("pad", "<i4")])


class ScaleRows(Family):
    def small_geometry(self):
        return Geometry("small", {"rows": 8, "cols": 96})

    def outputs(self, geometry):
        return [OutputSpec("out", "float32", (geometry["rows"], geometry["cols"]))]

    def make_inputs(self, geometry, seed, device):
        import torch

        g = torch.Generator(device="cpu").manual_seed(1000003 * seed + 7)
        x = torch.randn(geometry["rows"], geometry["cols"], generator=g)
        return {"x": x.to(device), "scale": float(torch.rand(1, generator=g)) + 0.5}

    def reference(self, inputs, geometry, dtype=None):
        import torch

        return {"out": inputs["x"].to(dtype or torch.float64) * inputs["scale"] + BIAS}

    def error_bound(self, output):
        return 1e-5

    def launch(self, genome, geometry):
        return Launch((geometry["rows"], 1, 1), (genome["block"], 1, 1), 0)

    def arg_types(self):
        return ARG_TYPES

    def kernel_args(self, inputs, outputs, geometry):
        rows, cols, scale = geometry["rows"], geometry["cols"], inputs["scale"]
        return KERNEL_ARGS

    def bytes_moved(self, geometry):
        return 8 * geometry["rows"] * geometry["cols"]


FAMILY = ScaleRows(
    name="scale_rows",
    entry="scale_rows<float, {width}>",
    knobs=(Knob("width", (1, 2, 4), 1), Knob("block", (32, 64, 128), 64)),
    geometry_params=(GeometryParam("rows", int, None, min=1), GeometryParam("cols", int, None, min=1)),
)
"""
GOOD_STRUCTS = (
    '"ppss"',
    '[outputs["out"], inputs["x"], np.array([rows, cols, 3], np.uint32), np.array((scale, 0.25, rows * cols, 0), '
    "AFFINE)[()]]",
    "3.25",
)
GOOD_SCALARS = ('"ppfi"', '[outputs["out"], inputs["x"], scale, cols]', "0.0")


def _family(tmp_path: Path, kernel: tuple[str, ...], args: tuple[str, str, str]) -> Path:
    folder = tmp_path / "scale_rows"
    folder.mkdir()
    params, cols, scale, bias = kernel
    src = VLLM_STYLE.replace("ARGS", params).replace("COLS", cols).replace("SCALE", scale).replace("BIAS", bias)
    (folder / "kernel.cu").write_text(src)
    types, kargs, ref_bias = args
    text = FAMILY_PY.replace("ARG_TYPES", types).replace("KERNEL_ARGS", kargs).replace("+ BIAS", f"+ {ref_bias}")
    (folder / "family.py").write_text(text)
    (folder / "evo.yaml").write_text(
        textwrap.dedent("""\
            campaign: scale_rows
            family: .
            geometries:
              - {name: r64, rows: 64, cols: 1024, weight: 1}
            budget: {attempts: 10, minutes: 1}
            proposer: {name: surrogate}
            gates:
              correctness: {mode: exact, seeds: 3, runs: 2}
            backend: gpu
            """)
    )
    return folder / "evo.yaml"


@pytest.fixture(autouse=True)
def _one_cache(tmp_path_factory, monkeypatch):
    """One compile cache for this file's families: they share kernel sources (compiles are what takes time)."""
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernel_params_cache"))


def _check(cfg: Path, gpu: bool = False) -> tuple[bool, str]:
    return run_check(cfg, sample=1, gpu=gpu, say=lambda s: None)


def test_evo_check_fails_a_wrong_arg_types_the_text_reader_cannot_see(tmp_path):
    """An int64 given for the int of a kernel with an enable_if_t return type passed evo check before."""
    ok, line = _check(_family(tmp_path, SCALARS, ('"ppfl"', GOOD_SCALARS[1], "0.0")))
    assert not ok and "\n" not in line, line
    assert (
        "parameter 3 of scale_rows in kernel.cu" in line and "is 4 B at offset 20 in the cubin; 'l' passes 8 B" in line
    )


def test_evo_check_passes_struct_arguments_packed_with_numpy(tmp_path):
    ok, line = _check(_family(tmp_path, STRUCTS, GOOD_STRUCTS))
    assert ok, line


@pytest.mark.parametrize(
    "types, kargs, expect",
    [
        ('"pps"', GOOD_STRUCTS[1], ("arg_types 'pps' has 3 letters; scale_rows in kernel.cu takes 4 parameters",)),
        (
            '"ppsp"',
            GOOD_STRUCTS[1],
            ("parameter 3 of scale_rows in kernel.cu", "is 16 B at offset 28 in the cubin; 'p' passes 8 B"),
        ),
        (
            '"ppss"',
            GOOD_STRUCTS[1].replace(
                "(scale, 0.25, rows * cols, 0), AFFINE)[()]", "[scale, 0.25, rows * cols], np.float32)"
            ),
            ("parameter 3 of scale_rows in kernel.cu", "is 16 B at offset 28 in the cubin; kernel_args[3] gives 12 B"),
        ),
        (
            '"ppss"',
            GOOD_STRUCTS[1].replace("np.array([rows, cols, 3], np.uint32)", "cols"),
            ("kernel_args[2] is a int, and arg_types says 's'",),
        ),
    ],
)
def test_evo_check_fails_struct_arguments_that_do_not_fit(tmp_path, types, kargs, expect):
    """Where the text reader can read the signature it also names the parameter; the cubin decides either way."""
    ok, line = _check(_family(tmp_path, STRUCTS, (types, kargs, "3.25")))
    assert not ok and all(e in line for e in expect) and "\n" not in line, line


def test_the_gpu_backend_refuses_a_module_whose_layout_differs(tmp_path):
    """Checked once per loaded module before the first launch: an error verdict, not garbage results."""
    from evo.config import load_config
    from harness.build import Builder
    from harness.gpu import ArgumentsError, module_layout

    cfg = load_config(_family(tmp_path, STRUCTS, GOOD_STRUCTS))
    (mod,) = Builder.for_config(cfg).build(cfg.family.baseline()).modules.values()
    assert [p.size for p in module_layout(mod, "ppss").params] == [8, 8, 12, 16]
    with pytest.raises(ArgumentsError, match="'f' passes 4 B") as e:
        module_layout(mod, "ppsf")
    assert e.value.kind == "arguments"
    from evo.core.records import error_code

    assert error_code(e.value.kind).value == "error.arguments"


@pytest.mark.gpu
def test_struct_arguments_reach_the_kernel_on_the_gpu(tmp_path):
    """evo check's GPU part: the baseline launched through the GPU backend (cuLaunchKernelEx for s arguments) is
    correct against float64, which it is only where the uint3 and the Affine struct arrive whole."""
    ok, line = _check(_family(tmp_path, STRUCTS, GOOD_STRUCTS), gpu=True)
    assert ok and "GPU baseline correct" in line, line


@pytest.mark.gpu
def test_the_driver_launcher_passes_structs_under_graph_capture():
    import cupy
    import torch

    from harness.driver_launch import launcher

    src = ENGINE_KERNEL + (
        'extern "C" __global__ void take(float* out, uint3 u, Params P, double d) {\n'
        "  out[0] = u.x; out[1] = u.y; out[2] = u.z; out[3] = P.n; out[4] = P.eps; out[5] = (float)P.stride;\n"
        "  out[6] = P.flags; out[7] = (float)d;\n}\n"
    )
    fn = cupy.RawModule(code=src, options=("-std=c++17",)).get_function("take").kernel
    params = np.dtype(
        [("x", "<u8"), ("y", "<u8"), ("n", "<i4"), ("eps", "<f4"), ("stride", "<i8"), ("flags", "<i4"), ("_", "<i4")]
    )
    out = torch.zeros(8, device="cuda")
    p = np.array((0, 0, 11, 0.5, 12, 13, 0), params)[()]
    go = launcher(fn.ptr, (1, 1, 1), (1, 1, 1), 0, "pssd", [out.data_ptr(), Dims(1, 2, 3), p, 2.5], pdl=False)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        go(torch.cuda.current_stream().cuda_stream)
    s.synchronize()
    assert out.tolist() == [1, 2, 3, 11, 0.5, 12, 13, 2.5]
    out.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        go(torch.cuda.current_stream().cuda_stream)
    g.replay()
    torch.cuda.synchronize()
    assert out.tolist() == [1, 2, 3, 11, 0.5, 12, 13, 2.5]
