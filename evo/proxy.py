"""A built-in decode proxy: a small DeepSeek-V4-like decoder whose hot path runs the shipped family kernels.

    python -m evo.proxy [--layers 4] [--hidden 4096] [--tokens 32] [--seed 0] [--genome-file f.json]
                        [--backend auto|gpu|reference] [--profile-out prof.csv]

Random seeded weights, nothing downloaded. Per layer, at T = 1:

1. mHC layer boundary: the residual is [1, 4, H] bf16 (hc_mult 4); the
   pre-norm GEMM ``x . fn^T`` gives ``dot_mix`` [1, 1, 24] and ``sqrsum``
   [1, 1] (split S = 1);
2. ``mhc_pre_big_fuse`` turns them into ``layer_input`` [1, H] bf16,
   ``post_mix`` [1, 4] and ``comb_mix`` [1, 4, 4]: on ``--backend gpu`` the
   compiled CuPy kernel of the genome in ``--genome-file`` (default: the
   family's baseline), built by harness.build.Builder and launched the way
   harness/gpu.py launches it; on ``--backend reference`` the family's
   float32 torch reference, ``layer_input`` rounded to bf16 the same way;
3. an attention-free block F on ``layer_input``: a decayed running state (so
   the next token depends on the history) and a top-2 MoE of tiny SwiGLU
   experts;
4. mHC post: ``residual = comb_mix @ residual + post_mix (x) F(layer_input)``.

Then a final norm and an LM head over a small vocabulary; greedy decoding of
``--tokens`` tokens from a fixed (seeded) prompt. On a GPU, one decode step
is captured as a CUDA graph and replayed (``--no-graph`` runs it eagerly).

Prints ``tokens/s: X`` (decode steps only) and ``sha256: <hex>`` (sha256 of
the generated token ids as int64 little-endian bytes). ``--profile-out``
writes a CSV ``Name,Total Time (ns)`` of time per decode step of each op
(torch.profiler; CUDA time on a GPU, CPU time otherwise) that
``evo.measure.profile.load_profile`` reads; the op ``mhc_pre_big_fuse`` is named so.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FAMILY_NAME = "mhc_pre_big_fuse"
HC = 4
MIX = 24
EXPERTS = 8
TOP_K = 2
DECAY = 0.75
PROMPT_LEN = 8
OPS = ("embed", "mhc_prenorm_gemm", FAMILY_NAME, "moe_block", "mhc_post", "lm_head")


class ProxyError(Exception):
    """A usage problem: printed as one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evo.proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=4096, help="H, a multiple of 64")
    p.add_argument("--tokens", type=int, default=32, help="tokens to generate (timed decode steps)")
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--genome-file", type=Path, default=None, help="JSON {family: {knob: value}}")
    p.add_argument("--backend", choices=("auto", "gpu", "reference"), default="auto")
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the reference backend runs (gpu always runs on cuda)",
    )
    p.add_argument(
        "--graph",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on CUDA, replay one decode step as a CUDA graph (default on)",
    )
    p.add_argument("--profile-out", type=Path, default=None, help="CSV of time per decode step per op")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: steadier and faster for this small model on a busy host)",
    )
    return p


# ---------------------------------------------------------------------------
# genomes


def load_genome(path: Path | None, family, geometry):
    """The genome for ``family`` in a genome file (baseline when absent); ProxyError when unusable."""
    if path is None:
        return family.baseline()
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ProxyError(f"--genome-file {path}: no such file") from None
    except json.JSONDecodeError as e:
        raise ProxyError(f"--genome-file {path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(raw, dict):
        raise ProxyError(f"--genome-file {path}: expected an object {{family: {{knob: value}}}}")
    entry = raw.get(family.name, {})
    if not isinstance(entry, dict):
        raise ProxyError(f"--genome-file {path}: {family.name}: expected an object of knob values")
    try:
        genome = family.genome(entry)
    except ValueError as e:
        raise ProxyError(f"--genome-file {path}: {e}") from None
    from evo.core.hooks import check_genome

    why = check_genome(family, genome, [geometry])
    if why:
        raise ProxyError(f"--genome-file {path}: genome invalid at H={geometry['H']}: {why}")
    return genome


# ---------------------------------------------------------------------------
# the model


class Model:
    """Weights and the static buffers one decode step reads and writes (so a CUDA graph can replay it)."""

    def __init__(self, layers: int, H: int, vocab: int, seed: int, device):
        import torch

        self.torch = torch
        self.L, self.H, self.V, self.device = layers, H, vocab, device
        self.I = max(16, H // 16)  # expert width
        g = torch.Generator().manual_seed(1_000_003 * seed + 7)

        def rnd(*shape, scale=1.0):
            return (torch.randn(shape, generator=g) * scale).to(device)

        H4 = HC * H
        self.emb = rnd(vocab, H)
        self.hc_scale = (torch.rand((1, HC, 1), generator=g) + 0.5).to(device)
        self.layers = []
        for _ in range(layers):
            self.layers.append(
                {
                    "fn": rnd(MIX, H4, scale=H4**-0.5),
                    "scale": (torch.rand(3, generator=g) + 0.5).to(device),
                    "base": rnd(MIX, scale=0.5),
                    "norm": (torch.rand(H, generator=g) + 0.5).to(device),
                    "router": rnd(EXPERTS, H, scale=H**-0.5),
                    "w_gate": rnd(EXPERTS, self.I, H, scale=H**-0.5),
                    "w_up": rnd(EXPERTS, self.I, H, scale=H**-0.5),
                    "w_down": rnd(EXPERTS, H, self.I, scale=self.I**-0.5),
                    "state": torch.zeros((1, H), device=device),
                }
            )
        self.final_norm = (torch.rand(H, generator=g) + 0.5).to(device)
        self.lm_head = rnd(vocab, H, scale=H**-0.5)
        self.prompt = torch.randint(vocab, (PROMPT_LEN,), generator=g).tolist()
        # static buffers
        f32, bf16 = torch.float32, torch.bfloat16
        self.tok = torch.zeros(1, dtype=torch.int64, device=device)
        self.residual = torch.zeros((1, HC, H), dtype=bf16, device=device)
        self.dot_mix = torch.zeros((1, 1, MIX), dtype=f32, device=device)
        self.sqrsum = torch.zeros((1, 1), dtype=f32, device=device)
        self.outs = {
            "post_mix": torch.zeros((1, HC), dtype=f32, device=device),
            "comb_mix": torch.zeros((1, HC, HC), dtype=f32, device=device),
            "layer_input": torch.zeros((1, H), dtype=bf16, device=device),
        }
        # callable(layer index): fills self.outs from dot_mix/sqrsum/residual
        self.fuse: Callable[[int], None] | None = None
        self.profiling = False

    def fuse_inputs(self, i: int) -> dict[str, Any]:
        lay = self.layers[i]
        return {
            "dot_mix": self.dot_mix,
            "sqrsum": self.sqrsum,
            "residual": self.residual,
            "scale": lay["scale"],
            "base": lay["base"],
        }

    def reset(self) -> None:
        for lay in self.layers:
            lay["state"].zero_()

    def _op(self, name: str):
        return self.torch.profiler.record_function(name) if self.profiling else contextlib.nullcontext()

    @staticmethod
    def _rmsnorm(x, w):
        return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * w

    def step(self) -> None:
        """One decode step: reads self.tok, writes the greedy next token into self.tok."""
        torch = self.torch
        H = self.H
        with self._op("embed"):
            e = self.emb.index_select(0, self.tok)  # [1, H]
            self.residual.copy_(e[:, None, :] * self.hc_scale)
        for i, lay in enumerate(self.layers):
            with self._op("mhc_prenorm_gemm"):
                x = self.residual.view(1, HC * H).float()
                self.dot_mix.copy_((x @ lay["fn"].t()).view(1, 1, MIX))
                self.sqrsum.copy_(x.pow(2).sum(-1, keepdim=True))
            with self._op(FAMILY_NAME):
                assert self.fuse is not None, "set model.fuse (torch_fuse or kernel_fuse) before step()"
                self.fuse(i)
            with self._op("moe_block"):
                xi = self.outs["layer_input"].float()
                st = lay["state"]
                st.mul_(DECAY).add_(xi, alpha=1.0 - DECAY)
                u = self._rmsnorm(xi + st, lay["norm"])[0]  # [H]
                w, idx = (lay["router"] @ u).topk(TOP_K)
                w = torch.softmax(w, dim=-1)
                gate = lay["w_gate"].index_select(0, idx) @ u  # [k, I]
                up = lay["w_up"].index_select(0, idx) @ u
                h = torch.nn.functional.silu(gate) * up
                o = (lay["w_down"].index_select(0, idx) @ h[:, :, None])[:, :, 0]  # [k, H]
                f = (w[:, None] * o).sum(0, keepdim=True)  # [1, H]
            with self._op("mhc_post"):
                new = torch.bmm(self.outs["comb_mix"], self.residual.float())
                new = new + self.outs["post_mix"][:, :, None] * f[:, None, :]
                self.residual.copy_(new)
        with self._op("lm_head"):
            hN = self._rmsnorm(self.residual.float().mean(1), self.final_norm)  # [1, H]
            logits = hN @ self.lm_head.t()
            self.tok.copy_(logits.argmax(-1))


# ---------------------------------------------------------------------------
# the two ways to run mhc_pre_big_fuse


def reference_fuse(model: Model, family, geometry):
    import torch

    def fuse(i: int) -> None:
        r = family.reference(model.fuse_inputs(i), geometry, dtype=torch.float32)
        for name, t in model.outs.items():
            t.copy_(r[name])  # layer_input: float32 -> bf16, round to nearest even

    return fuse


def gpu_fuse(model: Model, family, geometry, genome):
    """The compiled genome, launched through harness.gpu's launcher on the current torch stream."""
    from harness.build import Builder
    from harness.gpu import GpuBackend

    builder = Builder(family, [geometry])
    backend = GpuBackend(family, [geometry], builder, seeds=1, runs=1)
    loaded = backend.load(builder.build(genome), genome)
    launches = [backend._launcher(loaded, geometry, model.fuse_inputs(i), model.outs) for i in range(model.L)]

    def fuse(i: int) -> None:
        launches[i]()

    fuse.backend = backend  # type: ignore[attr-defined]  # keeps the CuPy streams and modules alive
    return fuse


# ---------------------------------------------------------------------------
# decoding


def _have_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def decode(model: Model, n: int, step) -> tuple[list[int], float]:
    """Feed the prompt, then ``n`` timed decode steps; (generated token ids, seconds of the n steps)."""
    torch = model.torch
    cuda = model.device.type == "cuda"
    model.reset()
    for t in model.prompt[:-1]:
        model.tok.fill_(t)
        model.step()
    model.tok.fill_(model.prompt[-1])
    out = torch.empty(n, dtype=torch.int64, device=model.device)
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(n):
        step()
        out[i : i + 1].copy_(model.tok)
    if cuda:
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return out.cpu().tolist(), secs


def graph_step(model: Model):
    """Capture one decode step as a CUDA graph; returns its replay."""
    torch = model.torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            model.step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model.step()
    torch.cuda.synchronize()
    model._graph = graph  # type: ignore[attr-defined]  # kept alive as long as the model
    return graph.replay


def _on_cuda(ev) -> bool:
    return str(getattr(ev, "device_type", "CPU")).endswith("CUDA")


def op_times(rows, cuda: bool, kernel_rows: bool) -> dict[str, float]:
    """Microseconds per op from ``key_averages()`` rows (see :func:`profile` for which rows count)."""
    times = {name: 0.0 for name in OPS}
    kernel = 0.0
    for ev in rows:
        if ev.key not in times:
            continue
        if _on_cuda(ev):  # the range's span on the GPU timeline, or the family kernel's own row
            if kernel_rows and ev.key == FAMILY_NAME:
                kernel = max(kernel, float(getattr(ev, "device_time_total", 0.0) or 0.0))
            continue
        if cuda:
            dev = getattr(ev, "device_time_total", None)
            times[ev.key] += float(dev if dev is not None else getattr(ev, "cuda_time_total", 0.0))
        else:
            times[ev.key] += float(ev.cpu_time_total)
    times[FAMILY_NAME] = max(times[FAMILY_NAME], kernel)
    return times


def profile(model: Model, n: int, path: Path, kernel_rows: bool = False) -> tuple[list[int], dict[str, float]]:
    """Decode eagerly under torch.profiler; write ``Name,Total Time (ns)`` per decode step; return the tokens.

    On CUDA an op's time is the device time of the kernels launched inside its range (the CPU-side
    row's ``device_time_total``), never the range's span on the GPU timeline, which in eager mode
    holds launch gaps. The CuPy-launched family kernel is not attributed to its range by the
    profiler (torch 2.11, seen in a development run on an H200; re-check on yours), so with ``kernel_rows`` its time is
    read from the kernel's own row (its entry point is named like the op). On the CPU an op's time
    is its CPU time. Every step of the run (prompt and decode, all T = 1) is counted.
    """
    import warnings

    torch = model.torch
    from torch.profiler import ProfilerActivity

    cuda = model.device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    model.profiling = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with torch.profiler.profile(activities=acts) as prof:
                tokens, _ = decode(model, n, model.step)
    finally:
        model.profiling = False
    steps = len(model.prompt) - 1 + n
    times = op_times(prof.key_averages(), cuda, kernel_rows)
    per_step_ns = {k: v * 1000.0 / steps for k, v in times.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["Name", "Total Time (ns)"])
        for k in OPS:
            w.writerow([k, f"{per_step_ns[k]:.1f}"])
    return tokens, per_step_ns


def token_hash(tokens: list[int]) -> str:
    import numpy as np

    return hashlib.sha256(np.asarray(tokens, dtype="<i8").tobytes()).hexdigest()


def run(args: argparse.Namespace) -> int:
    import torch

    from evo.core.family import Geometry, load_family

    if args.layers < 1 or args.tokens < 1 or args.vocab < 2:
        raise ProxyError("--layers and --tokens must be >= 1 and --vocab >= 2")
    if args.hidden < 64 or args.hidden % 64:
        raise ProxyError(f"--hidden {args.hidden}: must be a positive multiple of 64")
    family = load_family(FAMILY_NAME)
    geometry = Geometry(f"decode_T1_H{args.hidden}", {"T": 1, "H": args.hidden, "S": 1, "prenorm": False}, 1.0)
    why = family.check_geometry(geometry.params)
    if why:
        raise ProxyError(f"--hidden {args.hidden}: {why}")
    genome = load_genome(args.genome_file, family, geometry)

    have_cuda = _have_cuda()
    backend = args.backend
    if backend == "auto":
        backend = "gpu" if have_cuda else "reference"
    if backend == "gpu":
        if not have_cuda:
            raise ProxyError("--backend gpu: no CUDA GPU visible (use --backend reference)")
        if args.device == "cpu":
            raise ProxyError("--backend gpu runs on cuda; --device cpu goes with --backend reference")
        device = torch.device("cuda")
    else:
        if args.device == "cuda" and not have_cuda:
            raise ProxyError("--device cuda: no CUDA GPU visible")
        device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and have_cuda) else "cpu")

    if args.threads < 1:
        raise ProxyError(f"--threads {args.threads}: must be >= 1")
    torch.set_num_threads(args.threads)
    with torch.inference_mode():
        model = Model(args.layers, args.hidden, args.vocab, args.seed, device)
        model.fuse = (
            gpu_fuse(model, family, geometry, genome) if backend == "gpu" else reference_fuse(model, family, geometry)
        )
        use_graph = device.type == "cuda" and args.graph
        step = graph_step(model) if use_graph else model.step
        decode(model, min(2, args.tokens), step)  # warm-up (compiled modules, allocator, clocks)
        tokens, secs = decode(model, args.tokens, step)
        print(
            f"# evo.proxy: backend={backend} device={device.type} graph={int(use_graph)} layers={args.layers} "
            f"H={args.hidden} vocab={args.vocab} seed={args.seed} genome={genome.key}",
            file=sys.stderr,
        )
        if args.profile_out is not None:
            ptokens, per_step = profile(model, args.tokens, args.profile_out, kernel_rows=backend == "gpu")
            if ptokens != tokens:
                print(
                    "evo.proxy: error: the profiled (eager) decode generated other tokens than the timed one",
                    file=sys.stderr,
                )
                return 3
            total = sum(per_step.values()) or 1.0
            print(
                f"# profile: {args.profile_out}: {FAMILY_NAME} {per_step[FAMILY_NAME] / total:.2%} of "
                f"{total / 1000:.1f} us per step",
                file=sys.stderr,
            )
    print(f"tokens/s: {args.tokens / secs:.3f}")
    print(f"sha256: {token_hash(tokens)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except ProxyError as e:
        print(f"evo.proxy: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
