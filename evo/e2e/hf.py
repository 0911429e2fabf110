"""A real engine's greedy decode for the end-to-end gate: a Hugging Face transformers Llama-family model.

    python -m evo.e2e.hf [--config tiny|llama-3-8b-like] [--hidden 64 --layers 2 --heads 4 --vocab 256 ...]
                         [--checkpoint DIR] [--family NAME_OR_FOLDER] [--genome-file g.json] [--tokens 32]
                         [--seed 0] [--device auto|cpu|cuda] [--no-graph] [--profile OUT.csv] [--eps E]

The model is built from a config (a preset, each size overridable) with seeded random weights, or from a
local checkpoint folder (its config; its weights where the folder holds them); nothing is downloaded. It runs
in bf16 with a static KV cache: a prompt of ``--prompt-len`` seeded token ids is prefilled, then ``--tokens``
decode steps of one token each are timed, each feeding back the argmax of the last (greedy).

With ``--family`` (a fused add RMSNorm family: examples/fused_add_rmsnorm) every layer's residual adds and
RMSNorms are the family's (evo/e2e/norm_hook.py): on CUDA the compiled kernel of the genome in
``--genome-file`` (default: the family's baseline), on the CPU the family's torch reference (there is no
kernel to run there; ``--impl reference`` runs it on CUDA too, to hold the kernel's stream against it).
Without ``--family`` the model's own modules run: the engine's stream. On CUDA one decode step is captured
as a CUDA graph and replayed (``--no-graph``: eager), the engine's fast path for decode (transformers' static
cache is what its own CUDA-graph / torch.compile path decodes with).

Prints ``tokens/s: X`` (decode steps only) and ``sha256: <hex>`` (of the generated token ids, the prefill's
token first, as int64 little-endian), the lines evo/measure/e2e.py reads. ``--profile OUT.csv`` also decodes
once eagerly under torch.profiler and writes ``Name,Total Time (ns)`` per decode step (evo/e2e/hf_profile.py),
the CSV ``bound: {profile: ...}`` reads. ``--eps`` sets the family module's ``EPS`` (what its reference and its
kernel arguments read): a deliberately wrong kernel, for checking that the e2e gate rejects it.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.e2e.norm_hook import HookError, KernelNorm, ReferenceNorm, install

# The transformers versions this hook is written against: LlamaDecoderLayer's forward as in 5.17 to 5.25 (the
# cache argument is past_key_values in 5.17, cache from 5.25 on: both are handled).
SUPPORTED = ((5, 17), (6, 0))  # [low, high)
PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 128, "vocab": 256},
    "llama-3-8b-like": {
        "hidden": 4096,
        "layers": 32,
        "heads": 32,
        "kv_heads": 8,
        "intermediate": 14336,
        "vocab": 128256,
    },
}
SIZES = tuple(PRESETS["tiny"])
WARM_STEPS = 2  # decode steps run before timing (and before a CUDA graph capture)


class E2EUsageError(Exception):
    """A usage problem: printed as one line, exit status 2."""


@dataclass
class Decoder:
    """A model with its static cache and the static buffers one decode step reads and writes."""

    model: Any
    cache: Any
    cache_kw: str  # the name model.forward gives its cache argument (past_key_values, or cache from 5.25)
    prompt: list[int]
    ids: Any  # [1, 1] int64: the token fed to the next step, overwritten by its argmax
    pos: Any  # [1, 1] int64: its position
    graph: Any = None

    def forward(self, ids: Any, pos: Any) -> Any:
        kw = {self.cache_kw: self.cache}
        out = self.model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=1, **kw)
        return out.logits[:, -1, :].argmax(-1, keepdim=True)

    def prefill(self) -> None:
        """Empty the cache and feed the prompt in one forward; leaves its greedy token in ``ids``."""
        import torch

        self.cache.reset()
        dev = self.ids.device
        p = torch.tensor([self.prompt], dtype=torch.int64, device=dev)
        self.ids.copy_(self.forward(p, torch.arange(len(self.prompt), device=dev)[None]))
        self.pos.fill_(len(self.prompt))

    def step(self) -> None:
        """One decode step: reads ids and pos, writes the next greedy token into ids and advances pos."""
        self.ids.copy_(self.forward(self.ids, self.pos))
        self.pos.add_(1)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evo.e2e.hf", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(PRESETS), default="tiny", help="sizes to start from (default tiny)")
    for name in SIZES:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, help=f"override the preset's {name}")
    p.add_argument("--checkpoint", type=Path, default=None, help="a local model folder (config.json, weights)")
    p.add_argument("--family", default=None, help="a fused add RMSNorm family (name or folder) in every layer")
    p.add_argument("--genome-file", type=Path, default=None, help="JSON {family: {knob: value}}")
    p.add_argument("--tokens", type=int, default=32, help="decode steps (timed)")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa", help="transformers' attention")
    p.add_argument(
        "--graph", action=argparse.BooleanOptionalAction, default=True, help="on CUDA, replay a step as a graph"
    )
    p.add_argument(
        "--impl",
        choices=("auto", "kernel", "reference"),
        default="auto",
        help="the family's compiled kernel (CUDA) or its torch reference (auto: the kernel on CUDA, else reference)",
    )
    p.add_argument("--profile", type=Path, default=None, help="CSV of time per decode step per kernel (or op)")
    p.add_argument("--eps", type=float, default=None, help="the family's EPS overridden: a deliberately wrong kernel")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: steadier)")
    return p


def check_transformers() -> Any:
    """The transformers module, or E2EUsageError (not installed, or a version outside SUPPORTED)."""
    try:
        import transformers
    except ImportError:
        raise E2EUsageError("transformers is not installed: pip install 'evo-kernels[e2e]'") from None
    try:
        ver = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    except ValueError:
        ver = (0, 0)
    lo, hi = SUPPORTED
    if not (lo <= ver < hi):
        raise E2EUsageError(
            f"transformers {transformers.__version__} is not supported: the decoder-layer hook is written for "
            f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"
        )
    return transformers


def sizes(args: argparse.Namespace) -> dict[str, int]:
    """The preset's sizes with the flags given; E2EUsageError when they do not make a Llama."""
    s = dict(PRESETS[args.config])
    s.update({k: getattr(args, k) for k in SIZES if getattr(args, k) is not None})
    if any(v < 1 for v in s.values()):
        raise E2EUsageError(f"sizes must be >= 1: {s}")
    if s["hidden"] % s["heads"] or s["heads"] % s["kv_heads"]:
        raise E2EUsageError(f"--hidden {s['hidden']} must be a multiple of --heads, --heads of --kv-heads ({s})")
    if (s["hidden"] // s["heads"]) % 2:
        raise E2EUsageError(f"head size {s['hidden'] // s['heads']} must be even (rotary embedding)")
    return s


def seed_weights(model: Any, seed: int) -> None:
    """Every parameter drawn from one generator on the model's device, in name order (independent of transformers'
    own init): norm weights 1 + 0.1 N(0, 1), embeddings N(0, 1), matrices N(0, 1 / fan_in): activations of order
    one, so a greedy stream varies from token to token. (On the device: an 8B-like model's weights in a second, not
    minutes of CPU; so a CPU and a GPU run of one seed have other weights, and other streams.)"""
    import torch

    device = next(model.parameters()).device
    g = torch.Generator(device=device).manual_seed(1_000_003 * seed + 17)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            t = torch.randn(p.shape, generator=g, device=device)
            if p.dim() == 1:
                t = 1.0 + 0.1 * t
            elif "embed" not in name:
                t = t * p.shape[-1] ** -0.5
            p.copy_(t.to(p.dtype))


def build_model(args: argparse.Namespace, device: Any) -> Any:
    """The causal LM in bf16 on ``device``, in eval mode: a checkpoint's weights where ``--checkpoint`` holds them,
    else seeded random ones on a config (the checkpoint's, or the sizes). A random model is built on the device
    (transformers' own init of an 8B-like model on the CPU takes minutes)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    dt, attn = torch.bfloat16, args.attn
    if args.checkpoint is not None:
        folder = args.checkpoint
        if not (folder / "config.json").is_file():
            raise E2EUsageError(f"--checkpoint {folder}: no config.json there")
        if any(folder.glob("*.safetensors")) or any(folder.glob("*.bin")):
            model = AutoModelForCausalLM.from_pretrained(
                folder, local_files_only=True, dtype=dt, attn_implementation=attn
            )
            return model.to(device).eval()
        cfg = AutoConfig.from_pretrained(folder, local_files_only=True)
    else:
        cfg = llama_config(args)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dt, attn_implementation=attn)
    seed_weights(model, args.seed)
    return model.to(device).eval()


def llama_config(args: argparse.Namespace) -> Any:
    from transformers import LlamaConfig

    s = sizes(args)
    return LlamaConfig(
        vocab_size=s["vocab"],
        hidden_size=s["hidden"],
        intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        max_position_embeddings=max(256, args.prompt_len + args.tokens + 2 * WARM_STEPS),
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    )


def load_family_genome(args: argparse.Namespace, H: int) -> tuple[Any, Any]:
    """(family, genome) for ``--family``/``--genome-file`` (the baseline without a genome file), ``--eps`` applied;
    E2EUsageError in one line when unusable."""
    from evo.core.errors import FamilyError
    from evo.core.family import load_family
    from evo.e2e.norm_hook import geometry
    from evo.proxy import ProxyError, load_genome

    try:
        family = load_family(args.family, base=Path.cwd())
    except FamilyError as e:
        raise E2EUsageError(f"--family {args.family}: {e}") from None
    if args.eps is not None:
        module = sys.modules.get(type(family).__module__)
        if module is None or not isinstance(getattr(module, "EPS", None), float):
            raise E2EUsageError(f"--eps: family {family.name}'s module defines no float EPS to override")
        module.EPS = args.eps  # type: ignore[attr-defined]  # what its reference and kernel_args read
    try:
        return family, load_genome(args.genome_file, family, geometry(family, 1, H))
    except (ProxyError, HookError) as e:
        raise E2EUsageError(str(e)) from None


def make_decoder(model: Any, prompt: list[int], tokens: int, device: Any) -> Decoder:
    """The model with a static cache long enough for the prompt, the warm-up and ``tokens`` steps."""
    import torch
    from transformers import StaticCache

    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    cache = StaticCache(config=model.config, max_cache_len=len(prompt) + tokens + 2 * WARM_STEPS)
    ids = torch.zeros((1, 1), dtype=torch.int64, device=device)
    pos = torch.zeros((1, 1), dtype=torch.int64, device=device)
    return Decoder(model, cache, cache_kw, prompt, ids, pos)


def capture(dec: Decoder) -> Any:
    """One decode step captured as a CUDA graph (after a prefill and warm-up steps on a side stream); its replay."""
    import torch

    dec.prefill()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARM_STEPS):
            dec.step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            dec.step()
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise E2EUsageError(f"CUDA graph capture of a decode step failed ({first[:200]}); try --no-graph") from None
    torch.cuda.synchronize()
    dec.graph = graph
    return graph.replay


def decode(dec: Decoder, n: int, step: Any) -> tuple[list[int], float]:
    """Prefill, then ``n`` timed decode steps through ``step``; (the generated token ids, seconds of the n steps)."""
    import torch

    cuda = dec.ids.device.type == "cuda"
    dec.prefill()
    out = torch.empty(n + 1, dtype=torch.int64, device=dec.ids.device)
    out[0:1].copy_(dec.ids[0])
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(n):
        step()
        out[i + 1 : i + 2].copy_(dec.ids[0])
    if cuda:
        torch.cuda.synchronize()
    return out.cpu().tolist(), time.perf_counter() - t0


def token_hash(tokens: list[int]) -> str:
    from evo.proxy import token_hash as h

    return h(tokens)


def _device(choice: str) -> Any:
    import torch

    have = torch.cuda.is_available()
    if choice == "cuda" and not have:
        raise E2EUsageError("--device cuda: no CUDA GPU visible")
    return torch.device("cuda" if choice == "cuda" or (choice == "auto" and have) else "cpu")


def run(args: argparse.Namespace) -> int:
    import torch

    if args.tokens < 1 or args.prompt_len < 1 or args.threads < 1:
        raise E2EUsageError("--tokens, --prompt-len and --threads must be >= 1")
    if (args.genome_file is not None or args.eps is not None) and args.family is None:
        raise E2EUsageError("--genome-file and --eps choose the kernel of a family: give --family too")
    transformers = check_transformers()
    torch.set_num_threads(args.threads)
    device = _device(args.device)
    g = torch.Generator().manual_seed(1_000_003 * args.seed + 29)
    with torch.inference_mode():
        model = build_model(args, device)
        H, V = model.config.hidden_size, model.config.vocab_size
        prompt = torch.randint(V, (args.prompt_len,), generator=g).tolist()
        label, carry, family = "engine", None, None
        if args.family is not None:
            family, genome = load_family_genome(args, H)
            kernel = args.impl == "kernel" or (args.impl == "auto" and device.type == "cuda")
            if kernel and device.type != "cuda":
                raise E2EUsageError("--impl kernel: the compiled kernel runs on CUDA only (this run is on the CPU)")
            try:
                impl = KernelNorm(family, genome, H, [1, args.prompt_len]) if kernel else ReferenceNorm(family, H)
                carry = install(model, impl, family.name)
            except HookError as e:
                raise E2EUsageError(str(e)) from None
            label = f"{family.name} {impl.label} {genome.key}"
        dec = make_decoder(model, prompt, args.tokens, device)
        use_graph = device.type == "cuda" and args.graph
        step = capture(dec) if use_graph else dec.step
        decode(dec, min(WARM_STEPS, args.tokens), step)  # warm-up: allocator, clocks, lazy initialisation
        tokens, secs = decode(dec, args.tokens, step)
        print(
            f"# evo.e2e.hf: transformers {transformers.__version__} torch {torch.__version__} device={device.type} "
            f"graph={int(use_graph)} attn={args.attn} layers={model.config.num_hidden_layers} H={H} vocab={V} "
            f"seed={args.seed} norm={label}" + (f" eps={args.eps}" if args.eps is not None else ""),
            file=sys.stderr,
        )
        if args.profile is not None:
            from evo.e2e.hf_profile import profile_decode

            ptokens, note = profile_decode(dec, args.tokens, args.profile, family.name if family else None, carry)
            if ptokens != tokens:
                why = "the profiled (eager) decode made other tokens than the timed one"
                print(f"evo.e2e.hf: error: {why}", file=sys.stderr)
                return 3
            print(f"# profile: {args.profile}: {note}", file=sys.stderr)
    print(f"tokens/s: {args.tokens / secs:.3f}")
    print(f"sha256: {token_hash(tokens)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except E2EUsageError as e:
        print(f"evo.e2e.hf: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
