"""fused_add_rmsnorm: residual add + RMSNorm, the decode-time kernel of every pre-norm transformer layer.

For each token row t of T rows with hidden size H (kernel.cu):

    r               = bf16(float(x[t]) + float(residual[t]))      (added in float32, stored rounded to bf16)
    residual_out[t] = r
    out[t]          = bf16(float(r) * rsqrt(mean(float(r)^2) + eps) * float(weight))
                      (geometry parameter rounds 2: bf16(float(bf16(float(r) * rsqrt(...))) * float(weight)))

Engines update in place; this is the out-of-place form (x, residual and weight are only read, out
and residual_out only written). The harness launches one kernel many
times inside CUDA graphs and compares output hashes between runs on the same inputs, so the inputs
must not change from one launch to the next.

The kernel is written the way an inference engine writes it: ``#include <cuda_bf16.h>`` (its types and
conversion intrinsics, no bit tricks of our own), the tuning parameters as C++ template parameters,
``__launch_bounds__(BLOCK)``, ``__restrict__``. One block per token row. It uses no ``EVO_<KNOB>``
macro: ``entry`` is a template-id whose ``{knob}`` placeholders take the genome's values, and the
instantiation is compiled and looked up through an NVRTC name expression.

Knobs (all template parameters):

* ``block``: threads per block. Changes which elements each thread sums: not bit-preserving.
* ``vec``: bf16 values per load and store (2- to 16-byte accesses; H % vec == 0). Changes the
  partition of the square sum: not bit-preserving.
* ``cache``: 0 re-reads residual_out (the values this very thread wrote in pass 1, from L2) in pass 2;
  n > 0 keeps r in registers between the passes, n vectors a thread, and needs H <= block * vec * n.
  A thread sums its elements in the same order either way: bit-preserving.
* ``reduce``: ``warp0`` (warp 0 sums the per-warp partials and broadcasts the total through shared
  memory: two barriers) or ``all_warps`` (every warp sums the partials itself with the same butterfly:
  one barrier fewer, the same bits). Bit-preserving.

cub::BlockReduce is not a value of ``reduce``: its headers compile under evo's builder (CCCL's folder
comes first on NVRTC's include path), but a program that includes them takes about 2.4 s to compile under
NVRTC 13 where one genome of this kernel takes about 0.1 s, and it would give a third summation order.

A token row per block; several rows per block would only cut the number of blocks at decode sizes
(T = 1..128 leaves most of the GPU idle already), so there is no rows-per-block knob.

The baseline (knob defaults: block 256, vec 1, cache 0, reduce warp0) is the straightforward kernel an
engine starts from: scalar 2-byte accesses (valid for any H and any pointer alignment), a two-pass loop
that re-reads what it wrote (no limit on H), the textbook two-barrier reduction, and 256 threads, the
usual default. It is portable and correct, and untuned: at H = 4096 each thread issues 16 scalar loads
per input per pass, where 16-byte accesses need 2.

Correctness runs in tolerance mode (``block`` and ``vec`` change the order of the square sum);
``residual_out`` is exact for every genome, and the reference rounds it exactly as the kernel does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6  # passed to the kernel as a float32 argument, as engines pass it
MAX_H = 65536
REGS_PER_SM = 65536  # 32-bit registers an SM holds (sm_90); __launch_bounds__(block) leaves 65536 / block a thread
MAX_REGS = 255


def cache_words(genome: Mapping[str, Any]) -> int:
    """32-bit registers the register cache takes a thread (vec = 1: a bf16 value still takes a whole register)."""
    return max(1, genome["vec"] // 2) * genome["cache"]


class FusedAddRmsnorm(Family):
    include_dirs = ()  # the family's own folder and the CUDA headers are on the include path anyway
    nvrtc_options = ()

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        T, H = geometry["T"], geometry["H"]
        return [OutputSpec("out", "bfloat16", (T, H)), OutputSpec("residual_out", "bfloat16", (T, H))]

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        H = params["H"]
        if H % 8:
            return f"H={H} must be a multiple of 8 (every load width up to 16 bytes, rows 16-byte aligned)"
        if H > MAX_H:
            return f"H={H} is over {MAX_H} (one block streams a whole row: the wrong kernel for such rows)"
        return None

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        B, V, C = genome["block"], genome["vec"], genome["cache"]
        regs = min(MAX_REGS, REGS_PER_SM // B)
        if C and cache_words(genome) * 4 > regs:
            # From the ptxas reports of the whole space (NVRTC 13): block 1024, vec 8, cache 8 (32 cache registers
            # of 64, and pass 1 loads x beside them) spills; every genome whose cache takes at most a quarter of
            # its registers spills none (tests/test_example_rmsnorm.py compiles them all).
            return (
                f"cache={C} x vec={V} keeps {cache_words(genome)} registers a thread, over a quarter of the "
                f"{regs} that block={B} leaves (__launch_bounds__): ptxas spills"
            )
        for g in geometries:
            H = g["H"]
            if H % V:
                return f"H={H} at {g.name} is not a multiple of vec={V} (whole {2 * V}-byte accesses only)"
            if C and H > B * V * C:
                return (
                    f"cache={C} keeps block x vec x cache = {B * V * C} values of a row in registers; "
                    f"H={H} at {g.name} needs more (cache 0 re-reads residual_out instead)"
                )
        return None

    # --- inputs and the float64 reference --------------------------------
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H = geometry["T"], geometry["H"]
        g = torch.Generator(device=device).manual_seed(1000003 * seed + 41)

        def bf16_nonzero(t):
            t = t.to(torch.bfloat16)
            return torch.where(t == 0, torch.full_like(t, 0.5), t).contiguous()

        x = bf16_nonzero(torch.randn((T, H), generator=g, device=device))
        residual = bf16_nonzero(2.0 * torch.randn((T, H), generator=g, device=device))
        weight = bf16_nonzero(1.0 + 0.1 * torch.randn(H, generator=g, device=device))
        return {"x": x, "residual": residual, "weight": weight}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        # r as the kernel makes it: the two bf16 values added in float32, then rounded to bf16 (nearest even).
        r = (inputs["x"].float() + inputs["residual"].float()).to(torch.bfloat16).to(dt)
        inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + EPS)
        normed = r * inv
        if geometry.params.get("rounds", 1) == 2:  # rounded before the weight multiplies it (LlamaRMSNorm's order)
            normed = normed.to(torch.bfloat16).to(dt)
        return {"out": normed * inputs["weight"].to(dt), "residual_out": r}

    def error_bound(self, output: str) -> float:
        # residual_out is rounded by the reference exactly as by the kernel; out carries bf16 rounding (~2^-9).
        return 0.0 if output == "residual_out" else 1e-2

    # --- launching --------------------------------------------------------
    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        return Launch((geometry["T"], 1, 1), (genome["block"], 1, 1), 0)  # static shared memory only

    def arg_types(self) -> str:
        return "pppppfiii"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        return [
            outputs["out"],
            outputs["residual_out"],
            inputs["x"],
            inputs["residual"],
            inputs["weight"],
            EPS,
            geometry["T"],
            geometry["H"],
            geometry.params.get("rounds", 1),
        ]

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H = geometry["T"], geometry["H"]
        # read x, residual (T x H bf16 each) and weight (H); write out and residual_out (T x H each)
        return 2 * (2 * T * H + H) + 2 * (2 * T * H)

    def flops(self, geometry: Geometry) -> int:
        return 5 * geometry["T"] * geometry["H"]  # per element: add, square-accumulate (fma = 2), two multiplies


FAMILY = FusedAddRmsnorm(
    name="fused_add_rmsnorm",
    description="residual add + RMSNorm (bf16, out of place), one token row per block",
    entry="fused_add_rmsnorm<{block}, {vec}, {cache}, Reduce::{reduce}>",
    knobs=(
        Knob(
            "block",
            (64, 128, 256, 512, 1024),
            256,
            exact=False,
            doc="threads per block (which elements each thread sums: another square-sum order)",
        ),
        Knob(
            "vec",
            (1, 2, 4, 8),
            1,
            exact=False,
            doc="bf16 values per load/store: 2-, 4-, 8- or 16-byte accesses (another square-sum partition)",
        ),
        Knob(
            "cache",
            (0, 1, 2, 4, 8),
            0,
            doc="0: pass 2 re-reads residual_out; n: r stays in registers, n vectors a thread "
            "(needs H <= block * vec * n); the same per-thread order, the same bits",
        ),
        Knob(
            "reduce",
            ("warp0", "all_warps"),
            "warp0",
            doc="warp 0 sums the warp partials and broadcasts (two barriers), or every warp sums them itself "
            "in the same order (one barrier, the same bits)",
        ),
    ),
    faults={
        "wrong index: weight read one element off": (
            "ov[j] = normalize(rov[j], wv[j], inv, rounds);",
            "ov[j] = normalize(rov[j], wv[j ^ 1], inv, rounds);",
        ),
        "missing barrier: warp 0 sums the partials before the other warps wrote theirs": (
            "  __syncthreads();  // every warp's partial is in shared memory\n",
            "\n",
        ),
        "compile error: a missing semicolon": (
            "  const int n = H / VEC;  // vectors per row",
            "  const int n = H / VEC  // vectors per row",
            "error: compile",
        ),
        "heavy spills: a 1 KiB local array indexed at run time": (
            "  const int n = H / VEC;  // vectors per row",
            "  float junk[256];\n  for (int i = 0; i < 256; ++i) junk[i] = (float)(i * T);\n"
            "  if (T < 0) out[0] = __float2bfloat16_rn(junk[threadIdx.x & 255]);\n"
            "  const int n = H / VEC;  // vectors per row",
            "rejected: static",
        ),
        "out of bounds: one element written past the end of out": (
            "      ov[j] = normalize(rov[j], wv[j], inv, rounds);\n    }\n",
            "      ov[j] = normalize(rov[j], wv[j], inv, rounds);\n    }\n"
            "    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) out[row + H] = __float2bfloat16_rn(1.0f);\n",
        ),
        "illegal address: out written 1 TiB away": (
            "P* __restrict__ ov = reinterpret_cast<P*>(out + row);",
            "P* __restrict__ ov = reinterpret_cast<P*>(out + row + (1ull << 39));",
            "error: crash",
        ),
        "NaN output: a negative number under the square root": ("/ (float)H + eps)", "/ (float)H - 1.0e30f)"),
        "partial write: the last vector of every row is skipped": (
            "for (int j = threadIdx.x; j < n; j += BLOCK) {\n      ov[j]",
            "for (int j = threadIdx.x; j < n - 1; j += BLOCK) {\n      ov[j]",
        ),
        "missing output: residual_out is never stored": ("      rov[j] = r;\n", "\n"),
        "infinite loop: the block never finishes": (
            "  const int n = H / VEC;  // vectors per row",
            '  while (T > 0) { asm volatile(""); }\n  const int n = H / VEC;  // vectors per row',
            "error: timeout",
        ),
        # Timing inputs are random (never zeros), so a shortcut for zeros never fires and buys no false speed.
        "zero shortcut: the block skips its row when x and residual start with zeros": (
            "  const int n = H / VEC;  // vectors per row",
            "  if (__bfloat162float(x[row]) == 0.0f && __bfloat162float(residual[row]) == 0.0f) return;\n"
            "  const int n = H / VEC;  // vectors per row",
            "rejected: perf",
        ),
    },
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 20, doc="tokens (rows)"),
        GeometryParam("H", int, None, min=8, max=MAX_H, doc="hidden size, a multiple of 8"),
        GeometryParam(
            "rounds",
            int,
            1,
            min=1,
            max=2,
            doc="roundings of out to bf16: 1 once (FlashInfer's order), 2 the normalized value before the weight "
            "multiplies it (transformers' LlamaRMSNorm, vLLM): an engine's decode keeps its own token stream only "
            "with its own order (evo/e2e/norm_hook.py asks for 2)",
        ),
    ),
)
