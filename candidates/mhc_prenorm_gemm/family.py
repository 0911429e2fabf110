"""mhc_prenorm_gemm: the split-K GEMM + square sum before big-fuse (docs/families.md §2).

Inputs: x [T, K] bf16 (K = 4*H, the flattened residual), fn [24, K] fp32.
Outputs: the split partials dot_mix [S, T, 24] and sqrsum [S, T] fp32, S =
split_k, whose sums over S are x.fn^T and sum x^2 per token. Correctness is
judged on those sums (tolerance mode against float64: a split changes the
summation order).

S is a knob, but Family.outputs() sees only the geometry, so the output
buffers are allocated at the largest split of the knob space (S_MAX) and a
genome writes slices 0 .. split_k-1 only. Two hooks, methods of this class,
say what the harness must look at (they are not part of evo.family.Family yet;
see written_view and compare_view):

* written_view: the slices the kernel must write. Poison, NaN, race and hash
  checks belong on these; the slices past split_k keep the poison by design.
* compare_view: the float64 sums over those slices, shaped like reference().
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

HC = 4
MIX = 24
COLS = MIX + 1  # 24 mixes + the square sum
SPLITS = (1, 2, 4, 8, 16, 32, 64)
S_MAX = max(SPLITS)
STATIC_SMEM = 48 * 1024  # static shared memory a block gets without an opt-in attribute
FN_SCALE = 0.01  # fn ~ N(0, 0.01^2), as in the reference PR's benchmark
MIN_ABS = 2.0**-10  # |x|, |fn| are kept at least this far from zero


class MhcPrenormGemm(Family):
    # --- shapes ------------------------------------------------------------
    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        T = geometry["T"]
        return [OutputSpec("dot_mix", "float32", (S_MAX, T, MIX)), OutputSpec("sqrsum", "float32", (S_MAX, T))]

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if (HC * params["H"]) % 64:
            return f"K=4*H={HC * params['H']} must be a multiple of 64 (the smallest k tile)"
        return None

    def specialization(self, geometry: Geometry) -> Mapping[str, Any]:
        return {"H": geometry["H"]}  # K is compile-time (the k loops unroll); T is an argument

    # --- the knob space ------------------------------------------------------
    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        S, TT, KT = genome["split_k"], genome["token_tile"], genome["k_tile"]
        stages, tpt = genome["stages"], genome["tokens_per_thread"]
        fn_bytes = stages * MIX * KT * 4
        if fn_bytes > STATIC_SMEM:
            return (
                f"stages={stages} x k_tile={KT} needs {fn_bytes // 1024} KiB of shared memory for fn; a block "
                f"gets {STATIC_SMEM // 1024} KiB without an opt-in attribute the harness does not set"
            )
        if genome["math"] == "mma" and tpt != 1:
            return "tokens_per_thread applies to math=fma only (mma warps always own 16-token sub-tiles)"
        if tpt > TT:
            return f"tokens_per_thread={tpt} > token_tile={TT}: a thread's extra token slots would be empty"
        for g in geometries:
            K = HC * g["H"]
            if K % (S * KT):
                return (
                    f"split_k={S} x k_tile={KT} does not divide K={K} at {g.name}: each split must cover a "
                    "whole number of k tiles"
                )
        return None

    def order_signature(self, genome: Mapping[str, Any], geometry: Geometry) -> tuple:
        """What fixes the floating-point order of a genome's outputs at a geometry (equal signature: equal bits).

        fma: the split, the k lanes per token KG = threads * tokens_per_thread / token_tile (each lane's
        sequence of k, then a butterfly over min(KG, 32) lanes and a fixed sum over KG/32 warps) and how
        tiles deal quads to lanes: lane kl takes quads kl, kl+KG, ... of the whole split when KG divides
        the k_tile/4 quads of a tile, else quad kl of every tile. mma: the split, the k-group warps per
        16-token sub-tile and, likewise, how 32-column chunks fall to them. stages never changes it.
        """
        S, TT, KT, NT = genome["split_k"], genome["token_tile"], genome["k_tile"], genome["threads"]
        if genome["math"] == "fma":
            kg = NT * genome["tokens_per_thread"] // TT
            quads = KT // 4
            deal = ("strided",) if quads % kg == 0 else ("per_tile", quads)
            return ("fma", S, kg, deal)
        kgw = (NT // 32) // math.ceil(TT / 16)
        chunks = KT // 32
        deal = ("strided",) if chunks % kgw == 0 else ("per_tile", chunks)
        return ("mma", S, kgw, deal)

    def inexact_knobs(self, genome: Mapping[str, Any], geometry: Geometry) -> list[str]:
        if self.order_signature(genome, geometry) == self.order_signature(self.baseline(), geometry):
            return []
        return [k.name for k in self.knobs if not k.exact and genome[k.name] != k.default]

    # --- inputs and the float64 reference --------------------------------
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, K = geometry["T"], HC * geometry["H"]
        g = torch.Generator(device=device).manual_seed(1000003 * seed + 29)

        def away_from_zero(v):
            return torch.where(v.abs() < MIN_ABS, torch.where(v < 0, -MIN_ABS, MIN_ABS), v)

        x = away_from_zero(torch.randn((T, K), generator=g, device=device, dtype=torch.float32))
        fn = away_from_zero(torch.randn((MIX, K), generator=g, device=device, dtype=torch.float32) * FN_SCALE)
        return {"x": x.to(torch.bfloat16).contiguous(), "fn": fn.contiguous()}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        x, fn = inputs["x"].to(dt), inputs["fn"].to(dt)
        return {"dot_mix": x @ fn.T, "sqrsum": (x * x).sum(dim=-1)}

    def error_bound(self, output: str) -> float:
        return 1e-4

    # --- the hooks the harness needs for split outputs (see the module doc) ---
    def written_view(self, outputs: Mapping[str, Any], genome: Mapping[str, Any], geometry: Geometry) -> dict[str, Any]:
        """The part of each output buffer the kernel must write: the first split_k slices."""
        S = genome["split_k"]
        return {"dot_mix": outputs["dot_mix"][:S], "sqrsum": outputs["sqrsum"][:S]}

    def compare_view(self, outputs: Mapping[str, Any], genome: Mapping[str, Any], geometry: Geometry) -> dict[str, Any]:
        """The written partials summed over the split in float64, in a fixed order, shaped like reference()."""
        import torch

        out = {}
        for name, part in self.written_view(outputs, genome, geometry).items():
            acc = part[0].to(torch.float64)
            for s in range(1, part.shape[0]):
                acc = acc + part[s].to(torch.float64)
            out[name] = acc
        return out

    # --- launching --------------------------------------------------------
    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        tiles = -(-geometry["T"] // genome["token_tile"])
        return Launch((tiles, genome["split_k"], 1), (genome["threads"], 1, 1), 0)

    def arg_types(self) -> str:
        return "ppppi"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        return [inputs["x"], inputs["fn"], outputs["dot_mix"], outputs["sqrsum"], geometry["T"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        """x once, fn once, one split's outputs: the least any genome moves through HBM.

        fn (1.5 / 2.6 MiB) is read again by every token tile, but those re-reads hit the 50 MiB L2, so they
        are not counted; traffic() gives the genome's own count.
        """
        T, K = geometry["T"], HC * geometry["H"]
        return T * K * 2 + MIX * K * 4 + T * COLS * 4

    def traffic(self, genome: Mapping[str, Any], geometry: Geometry) -> int:
        """Bytes a genome asks of the memory system: x once, fn once per token tile, split_k partials."""
        T, K = geometry["T"], HC * geometry["H"]
        tiles = -(-T // genome["token_tile"])
        return T * K * 2 + tiles * MIX * K * 4 + genome["split_k"] * T * COLS * 4

    def flops(self, geometry: Geometry) -> int:
        return 2 * geometry["T"] * HC * geometry["H"] * COLS

    # --- a CPU model of the kernel's decomposition (tests, debugging) ---------
    def k_schedule(self, genome: Mapping[str, Any], H: int) -> list[list[list[int]]]:
        """For split s and k lane (fma) or k-group warp (mma) l: the columns it accumulates, in order.

        Mirrors the loops of kernel.cu: fma lane kl takes quad q = kl + i*KG of each tile (4 columns);
        mma warp kw takes 32-column chunk c = kw + i*KGW of each tile.
        """
        K = HC * H
        S, TT, KT, NT = genome["split_k"], genome["token_tile"], genome["k_tile"], genome["threads"]
        KC = K // S
        if genome["math"] == "fma":
            lanes, width = NT * genome["tokens_per_thread"] // TT, 4
        else:
            lanes, width = (NT // 32) // math.ceil(TT / 16), 32
        per_tile = KT // width
        out = []
        for s in range(S):
            sched = []
            for lane in range(lanes):
                cols = []
                for it in range(KC // KT):
                    for u in range(lane, per_tile, lanes):
                        k0 = s * KC + it * KT + u * width
                        cols.extend(range(k0, k0 + width))
                sched.append(cols)
            out.append(sched)
        return out

    def emulate(self, inputs: Mapping[str, Any], genome: Mapping[str, Any], geometry: Geometry) -> dict[str, Any]:
        """The partials [split_k, T, 24] and [split_k, T] in float32, following the kernel's decomposition.

        Each lane (or k-group warp) accumulates its columns of k_schedule in order, then the lanes are
        reduced as the kernel does (fma: butterfly over min(KG, 32) lanes, then warps in order; mma:
        k groups in order). Products and sums round separately here (the kernel fuses them) and an mma's
        inner sum is modelled as a plain fp32 sum, so results agree with the GPU to fp32 tolerance, not
        bit for bit.
        """
        import torch

        x = inputs["x"].to(torch.float32).cpu()
        fn = inputs["fn"].to(torch.float32).cpu()
        T, K = x.shape
        # Column K is a zero pad for lanes that run out of work (the kernel's idle lanes add nothing).
        x = torch.cat([x, torch.zeros((T, 1))], dim=1)
        fn = torch.cat([fn, torch.zeros((MIX, 1))], dim=1)
        sched = self.k_schedule(genome, geometry["H"])
        mma = genome["math"] == "mma"
        width = 32 if mma else 4
        dots, sqs = [], []
        for per_lane in sched:
            lanes = len(per_lane)
            longest = max(len(c) for c in per_lane)
            padded = [c + [K] * (longest - len(c)) for c in per_lane]
            idx = torch.tensor(padded, dtype=torch.long).view(lanes, -1, width)  # [lanes, steps, width]
            acc = torch.zeros((T, lanes, COLS), dtype=torch.float32)
            for st in range(idx.shape[1]):
                cols = idx[:, st]  # [lanes, width]
                xv = x[:, cols]  # [T, lanes, width]
                wv = fn[:, cols]  # [24, lanes, width]
                if mma:
                    acc[..., :MIX] += torch.einsum("tlw,jlw->tlj", xv, wv)
                    acc[..., MIX] += (xv * xv).sum(-1)
                else:
                    for e in range(width):
                        acc[..., :MIX] += xv[..., e, None] * wv[:, :, e].T[None]
                        acc[..., MIX] += xv[..., e] * xv[..., e]
            if mma:
                tot = acc[:, 0]
                for lane in range(1, lanes):
                    tot = tot + acc[:, lane]
            else:
                group = min(lanes, 32)
                o = group // 2
                while o >= 1:
                    perm = torch.arange(lanes) ^ o
                    acc = acc + acc[:, perm]
                    o //= 2
                tot = acc[:, 0]
                for w in range(1, max(1, lanes // 32)):
                    tot = tot + acc[:, 32 * w]
            dots.append(tot[:, :MIX])
            sqs.append(tot[:, MIX])
        return {"dot_mix": torch.stack(dots), "sqrsum": torch.stack(sqs)}


FAMILY = MhcPrenormGemm(
    name="mhc_prenorm_gemm",
    description="mHC pre-norm GEMM + square sum (split-K partials): dot_mix = x.fn^T, sqrsum = sum x^2",
    entry="mhc_prenorm_gemm",
    knobs=(
        Knob(
            "split_k",
            SPLITS,
            1,
            exact=False,
            doc="K splits, one block column each; partials written to slices 0..split_k-1",
        ),
        Knob(
            "token_tile",
            (1, 2, 4, 8, 16, 32, 64),
            32,
            exact=False,
            doc="tokens per block (blocks = ceil(T/token_tile) x split_k); sets the k lanes per token",
        ),
        Knob(
            "k_tile",
            (64, 128, 256, 512),
            256,
            exact=False,
            doc="fn columns staged per k-loop trip (and dealt to lanes per trip)",
        ),
        Knob("threads", (128, 256), 256, exact=False, doc="threads per block; sets the k lanes per token"),
        Knob(
            "stages",
            (0, 1, 2),
            1,
            doc="fn tiles: 0 read in place from global, 1 staged in shared memory, 2 double-buffered cp.async",
        ),
        Knob(
            "tokens_per_thread",
            (1, 2, 4),
            1,
            exact=False,
            doc="math=fma: tokens whose 25 sums one thread carries (each fn value read from shared memory "
            "feeds this many FMAs)",
        ),
        Knob(
            "math",
            ("fma", "mma"),
            "fma",
            exact=False,
            doc="fp32 FMAs, or bf16 mma.sync m16n8k16 with fn split into hi+mid+lo bf16 terms (fp32 accumulate)",
        ),
    ),
    faults={
        "k loop stops one tile short": (
            "for (int it = 0; it < NTILES; ++it) {  // one fn tile per trip",
            "for (int it = 0; it < NTILES - 1; ++it) {  // one fn tile per trip",
        ),
        "missing barrier: warps read the fn tile before it is staged": (
            "    __syncthreads();  // the staged fn tile is visible to every warp\n",
            "\n",
        ),
    },
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 16, doc="tokens"),
        GeometryParam("H", int, None, min=16, max=65536, doc="hidden size (K = 4*H)"),
    ),
)
