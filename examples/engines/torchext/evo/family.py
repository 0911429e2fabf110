"""vllm_like_fused_add_rms_norm: a torch extension's in-place fused add + RMSNorm, tuned from outside its tree.

``kernel.cu`` is a link to ``../csrc/layernorm_kernels.cu``, the extension's file as it is: torch includes
(``<torch/all.h>``, ``<torch/cuda.h>``, ``c10/cuda``), a dispatch header of its own, two ``enable_if_t``-returning
overloads of ``vllm_like::fused_add_rms_norm_kernel<scalar_t, width>`` (packed for width > 0, generic for width 0)
and a host wrapper taking tensors. ``torch_headers`` puts the installed torch's include folders on the path; the
compile options are those torch's extension builder passes nvcc.

For each token row of T rows of H (one row per block, blockDim.x threads), in place:

    r          = bf16(float(input) + float(residual))
    residual  <- r
    input     <- bf16(float(r) * rsqrt(mean(float(r)^2) + eps) * float(weight))

Knobs: ``width`` (the template's width: 0 the generic scalar path, 2/4/8 the packed one) and ``block``
(blockDim.x, read at run time: the same code, another launch). ``block = "engine"`` is the wrapper's own choice
(``fused_add_rms_norm_block_size`` in the .cu) restated in :meth:`launch`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6  # the wrapper takes a double and passes a float


def engine_block_size(num_tokens: int, hidden_size: int, width: int) -> int:
    """fused_add_rms_norm_block_size of layernorm_kernels.cu: a packed vector per thread in whole warps, at most
    1024 threads for up to 64 tokens, 256 above."""
    per_row = hidden_size // width if width > 0 else hidden_size
    max_threads = 1024 if num_tokens <= 64 else 256
    return min(-(-per_row // 32) * 32, max_threads)


class VllmLikeFusedAddRmsNorm(Family):
    include_dirs = ("../csrc",)  # dispatch_utils.h (kernel.cu is a link: its quoted includes look beside the link)
    compiler = "nvcc"
    torch_headers = True
    # what torch.utils.cpp_extension passes nvcc for an extension (COMMON_NVCC_FLAGS and its C++ standard)
    compile_options = (
        "-std=c++20",
        "--expt-relaxed-constexpr",
        "-D__CUDA_NO_HALF_OPERATORS__",
        "-D__CUDA_NO_HALF_CONVERSIONS__",
        "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "-D__CUDA_NO_HALF2_OPERATORS__",
    )

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["H"] % 8:
            return f"H={params['H']} must be a multiple of 8 (the wrapper's packed path)"
        return None

    def small_geometry(self) -> Geometry | None:
        return Geometry("small", {"T": 4, "H": 1024})

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        w = genome["width"]
        for g in geometries:
            if w and g["H"] % w:
                return f"H={g['H']} at {g.name} is not a multiple of width={w}"
        return None

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        shape = (geometry["T"], geometry["H"])
        return [  # in place: each buffer starts as a copy of the input of its name
            OutputSpec("input", "bfloat16", shape, init_from="input"),
            OutputSpec("residual", "bfloat16", shape, init_from="residual"),
        ]

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H = geometry["T"], geometry["H"]
        g = torch.Generator(device=device).manual_seed(15485863 * seed + 5)

        def bf16_nonzero(t):
            t = t.to(torch.bfloat16)
            return torch.where(t == 0, torch.full_like(t, 0.25), t).contiguous()

        return {
            "input": bf16_nonzero(torch.randn((T, H), generator=g, device=device)),
            "residual": bf16_nonzero(2.0 * torch.randn((T, H), generator=g, device=device)),
            "weight": bf16_nonzero(1.0 + 0.1 * torch.randn(H, generator=g, device=device)),
        }

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        r = (inputs["input"].float() + inputs["residual"].float()).to(torch.bfloat16).to(dt)
        inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + EPS)
        return {"input": r * inv * inputs["weight"].to(dt), "residual": r}

    def error_bound(self, output: str) -> float:
        return 0.0 if output == "residual" else 1e-2

    def block_size(self, genome: Mapping[str, Any], geometry: Geometry) -> int:
        b = genome["block"]
        return engine_block_size(geometry["T"], geometry["H"], genome["width"]) if b == "engine" else int(b)

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        # as the wrapper launches it: grid(num_tokens), block(threads), static shared memory only
        return Launch((geometry["T"], 1, 1), (self.block_size(genome, geometry), 1, 1), 0)

    def arg_types(self) -> str:
        return "ppplfi"

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        H = geometry["H"]
        return [outputs["input"], outputs["residual"], inputs["weight"], H, EPS, H]  # input_stride = H: contiguous

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H = geometry["T"], geometry["H"]
        return 2 * (2 * T * H + H) + 2 * (2 * T * H)

    def flops(self, geometry: Geometry) -> int:
        return 5 * geometry["T"] * geometry["H"]


FAMILY = VllmLikeFusedAddRmsNorm(
    name="vllm_like_fused_add_rms_norm",
    description="a torch extension's fused_add_rms_norm_kernel (in place, blockDim.x chosen at launch)",
    entry="vllm_like::fused_add_rms_norm_kernel<{scalar}, {width}>",
    knobs=(
        Knob("scalar", ("c10::BFloat16",), "c10::BFloat16", doc="scalar_t as the wrapper's dispatch names it"),
        Knob("width", (0, 2, 4, 8), 8, exact=False, doc="elements per access: 0 the generic scalar path"),
        Knob(
            "block",
            ("engine", 128, 256, 512, 1024),
            "engine",
            exact=False,
            launch_only=True,
            doc="blockDim.x (launch only); engine: fused_add_rms_norm_block_size, the wrapper's own choice",
        ),
    ),
    faults={
        "half the rows: blocks of the second half return before writing": (
            "  const int num_vecs = hidden_size / width;\n",
            "  const int num_vecs = hidden_size / width;\n  if (2 * blockIdx.x >= gridDim.x) return;\n",
        ),
    },
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 20, doc="tokens (rows)"),
        GeometryParam("H", int, None, min=8, max=1 << 16, doc="hidden size, a multiple of 8"),
    ),
)
