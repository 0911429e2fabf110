"""The GPU backend: run, check and time compiled variants on the local GPU.

Measuring ideas (printed beside every number, nvbench style):
- batch: one sample is a CUDA-graph replay of N launches (N chosen for each
  part so its replay takes about ``batch_ms``), so launch gaps and event
  resolution drop out;
- interleaved: candidate, champion and baseline take turns within a round,
  the order rotating, and speedups are per-round ratios;
- noise: an A/A floor (baseline against a second copy of itself) at start;
- clocks: SM clock and throttle reasons read through NVML before and after
  every sample; a throttled sample's whole round is thrown out;
- hot L2: inputs are reused across launches (decode-time inputs were just
  written by the previous kernel, so this matches use for small shapes).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.core.family import Family, FamilyError, Geometry, inout_problem
from evo.core.hooks import calling
from gates.correctness import CorrectnessEvidence, OutputCheck
from harness import torch_peer
from harness.build import Builder, Built, spec_key
from harness.cubin import CubinError, ParamLayout, read_param_layout
from harness.errors import HarnessError
from harness.inout import (
    InputWrite,
    fresh_outputs,
    in_place,
    initial_values,
    snapshot,
    start_outputs,
    unwritten_inout,
    written_inputs,
)
from harness.kernel_params import layout_problem, struct_bytes

POISON = (0xA5, 0x5A)  # one byte pattern per run, never zeros
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory a launch may ask for without the function attribute
GUARD, GUARD_BYTES = 0xCD, 4096  # bands around every output buffer catch writes past its ends
# The latency floor's kernel (evo/measure/ceiling.py): nothing but what a launch costs. Under PDL it lets the next
# launch in at once and then waits for the launch before, as the fastest PDL-safe candidate could (kernel.cu's
# pdl_wait).
EMPTY_KERNEL = r"""
extern "C" __global__ void evo_empty() {
#if EVO_PDL
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
"""
EMPTY_KERNEL_NAME = "evo_empty"


def empty_kernel_options(pdl: bool) -> tuple[str, ...]:
    return ("-std=c++17", f"-DEVO_PDL={1 if pdl else 0}")


class ArgumentsError(HarnessError):
    """arg_types or kernel_args do not fit the compiled kernel's parameters (count, sizes; harness/cubin.py)."""

    kind, gate = "arguments", "static"


def module_layout(mod: Any, types: str) -> ParamLayout:
    """The parameter layout of a built module, held against arg_types (count, and the sizes of the fixed-size
    letters); ArgumentsError when they differ or the cubin cannot say."""
    try:
        layout = read_param_layout(mod.cubin_path, mod.function)
    except CubinError as e:
        raise ArgumentsError(f"could not read the parameter layout of {mod.function}: {e}") from None
    problem = layout_problem(types, layout)
    if problem:
        raise ArgumentsError(problem)
    return layout


class KernelCrash(HarnessError):
    """A launch failed (illegal address, trap, ...): the CUDA context is no longer usable."""

    kind, fatal = "crash", True


@dataclass
class Loaded:
    """A built genome with its kernels loaded into this process."""

    built: Built
    genome: Mapping[str, Any]
    functions: dict[str, Any]  # spec_key -> cupy RawKernel
    hashes: dict[str, str] = field(default_factory=dict)  # "geometry/output" -> its seed-0 hash (for recheck)
    # Launch with programmatic dependent launch where the family says the kernel is safe for it: each
    # launch may then overlap the one before it (harness/driver_launch.py).
    pdl: bool = False
    layouts: dict[str, ParamLayout] = field(default_factory=dict)  # spec_key -> the kernel's parameters (its cubin)
    family: Family | None = None  # a peer kernel's (peer.kernels), run on the campaign's inputs; None: the campaign's


@dataclass
class Samples:
    times_us: dict[str, list[float]]  # label -> per-round µs per launch (throttled rounds removed)
    discarded: int
    launches: int | dict[str, int]  # per graph: one count for every part, or label -> its own count
    clocks: dict[str, Any]
    stopped_early: bool = False  # gates.perf.EarlyStop cut the rounds short

    def batch_text(self) -> str:
        """'graph x 55 launches', or 'graphs of cand x 414, champ x 402, base x 55 launches'."""
        if isinstance(self.launches, dict):
            if len(set(self.launches.values())) > 1:
                return "graphs of " + ", ".join(f"{k} x {v}" for k, v in self.launches.items()) + " launches"
            return f"graph x {next(iter(self.launches.values()), 0)} launches"
        return f"graph x {self.launches} launches"


def _dtype(name: str):
    import torch

    return getattr(torch, name)


def _int_view(t):
    """A bitwise view of a tensor (equality on it is byte equality; NaN == NaN, -0 != +0)."""
    import torch

    size = t.element_size()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


def _poison_value(t, byte: int) -> int:
    size = t.element_size()
    v = int.from_bytes(bytes([byte]) * size, "little", signed=True)
    return v


class _Padded(dict):
    """The baseline's written outputs laid over full-size buffers, so a family's compare_view can read them."""

    def __init__(self, written: dict, full: dict):
        super().__init__()
        for name, buf in full.items():
            w = written.get(name)
            if w is not None and w.shape != buf.shape:
                b = buf.clone()
                b[: w.shape[0]] = w
                self[name] = b
            else:
                self[name] = w if w is not None else buf


def sha256_tensor(t) -> str:
    import torch

    return hashlib.sha256(t.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()


class GpuBackend:
    name = "gpu"
    simulated = False
    peer_kernels = True  # loads and times other families' kernels of the campaign's problem (load(..., peer=name))

    def __init__(
        self,
        family: Family,
        geometries: Sequence[Geometry],
        builder: Builder,
        *,
        seeds: int = 3,
        runs: int = 2,
        batch_ms: float = 1.0,
        nvml: Any = None,
        pdl: bool = False,
    ):
        import cupy
        import torch

        self.torch, self.cupy = torch, cupy
        self.family, self.geometries, self.builder = family, list(geometries), builder
        self.seeds, self.runs, self.batch_ms = seeds, runs, batch_ms
        self.nvml = nvml
        self.pdl = pdl  # gates.perf.launch = pdl: PDL launches where the family's pdl_safe allows
        self.device = torch.device("cuda")
        self.stream = torch.cuda.Stream()
        self._inputs: dict[tuple[str, int], dict[str, Any]] = {}
        self._pristine: dict[tuple[str, int], dict[str, Any]] = {}  # a copy of each input: no launch may change it
        self._refs: dict[tuple[str, int], dict[str, Any]] = {}
        self._base_out: dict[tuple[str, int], dict[str, Any]] = {}
        self._outbuf: dict[str, dict[str, Any]] = {}
        self._guards: dict[str, dict[str, tuple[Any, Any]]] = {}
        self._streams: dict[int, Any] = {}
        self._warmed = False
        self.baseline_hashes: dict[str, str] = {}
        self.baseline_errors: dict[str, float] = {}
        self.peers: dict[str, Family] = {}  # peer name -> its family (cfg.peer.kernels), for load(..., peer=name)

    @classmethod
    def for_config(cls, cfg: Any, builder: Builder) -> GpuBackend:
        """The backend a campaign config asks for: its geometries, correctness seeds and runs, batch_ms, launches
        (gates.perf.launch) and NVML clocks where NVML is present. ``builder`` must carry cfg.build_defines."""
        from harness.device import Nvml

        c, p = cfg.gates.correctness, cfg.gates.perf
        nvml = Nvml()
        backend = cls(
            cfg.family,
            list(cfg.geometries),
            builder,
            seeds=c.seeds,
            runs=c.runs,
            batch_ms=p.batch_ms,
            nvml=nvml if nvml.available() else None,
            pdl=p.launch == "pdl",
        )
        backend.peers = {k.name: k.family for k in getattr(cfg.peer, "kernels", ())}
        return backend

    # --- facts -----------------------------------------------------------

    def facts(self) -> dict[str, Any]:
        torch, cupy = self.torch, self.cupy
        props = torch.cuda.get_device_properties(0)
        out: dict[str, Any] = {
            "name": props.name,
            "sm_count": props.multi_processor_count,
            "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
            "torch": torch.__version__,
            "cupy": cupy.__version__,
            "cuda_runtime": ".".join(map(str, divmod(cupy.cuda.runtime.runtimeGetVersion() // 10, 100))),
            "arch": self.builder.arch,
        }
        if self.nvml is not None:
            out.update(self.nvml.facts())
        return out

    def clock(self):
        return self.nvml.sample() if self.nvml is not None else None

    # --- loading and launching ------------------------------------------
    def load(self, built: Built, genome: Mapping[str, Any], peer: str | None = None) -> Loaded:
        """The built genome's kernels (``peer``: a peer kernel's name, whose family built it), loaded once each
        module's parameter layout (its cubin's) takes arg_types: else an ArgumentsError, never a launch of garbage."""
        if peer == torch_peer.TORCH_COMPILE:  # torch.compile of the reference (peer.torch_compile), timed as a part
            return torch_peer.TorchPart(str(genome.get("mode", "default")), dict(genome))  # type: ignore[return-value]
        cupy = self.cupy
        fam = self.peers[peer] if peer is not None else self.family
        fns, layouts = {}, {}
        for key, mod in built.modules.items():
            layouts[key] = module_layout(mod, fam.arg_types())
            fns[key] = cupy.RawModule(path=mod.cubin_path).get_function(mod.function)  # a template's lowered name
        return Loaded(built, genome, fns, pdl=self.pdl, layouts=layouts, family=fam if peer is not None else None)

    def _fam(self, loaded: Loaded) -> Family:
        return loaded.family if loaded.family is not None else self.family

    def _args(self, inputs, outputs, g: Geometry, fam: Family | None = None) -> tuple:
        import numpy as np

        torch = self.torch
        vals, types = (fam or self.family).kernel_args(inputs, outputs, g), (fam or self.family).arg_types()
        if len(types) != len(vals):
            raise ValueError(
                f"kernel_args gives {len(vals)} arguments and arg_types() {len(types)} letters ({types!r})"
            )
        out: list[np.generic] = []
        for t, v in zip(types, vals):
            if t == "p":
                out.append(np.uint64(v.data_ptr()) if isinstance(v, torch.Tensor) else np.uint64(v))
            elif t == "i":
                out.append(np.int32(v))
            elif t == "l":
                out.append(np.int64(v))
            elif t == "f":
                out.append(np.float32(v))
            elif t == "d":
                out.append(np.float64(v))
            elif t == "s":
                b = struct_bytes(v)
                if b is None:
                    raise ArgumentsError(f"kernel_args gives a {type(v).__name__} where arg_types says 's' (bytes)")
                out.append(np.void(b))
            else:
                raise ValueError(f"unknown kernel argument type {t!r}")
        return tuple(out)

    def _launcher(self, loaded: Loaded, g: Geometry, inputs, outputs):
        """A zero-argument callable that launches the kernel on the torch stream that is current."""
        if isinstance(loaded, torch_peer.TorchPart):
            return torch_peer.launcher(self, loaded, g)
        fam = self._fam(loaded)
        spec = self.builder.spec_of(g) if loaded.family is None else spec_key(fam.specialization(g))
        fn = loaded.functions[spec]
        with calling(fam.name, "launch()"):
            lc = fam.launch(loaded.genome, g)
        args = self._args(inputs, outputs, g, fam)
        types = fam.arg_types()
        if spec in loaded.layouts:  # the s values' sizes, which arg_types alone does not give
            problem = layout_problem(types, loaded.layouts[spec], args)
            if problem:
                raise ArgumentsError(f"{problem} (at {g.name})")
        torch = self.torch
        if lc.shared_bytes > STATIC_SMEM_LIMIT:  # more than 48 KiB of dynamic shared memory needs the opt-in
            fn.max_dynamic_shared_size_bytes = lc.shared_bytes  # (a cupy RawKernel)

        pdl = loaded.pdl and fam.pdl_safe(loaded.genome)
        # A value passed by value goes through the driver, which copies as many bytes as the cubin's layout says
        # (not left to how a CuPy call reads a numpy void).
        if pdl or "s" in types:
            from harness.driver_launch import launcher

            ex = launcher(fn.kernel.ptr, lc.grid, lc.block, lc.shared_bytes, types, args, pdl=pdl)

            def launch_driver() -> None:
                ex(torch.cuda.current_stream().cuda_stream)

            return launch_driver

        def launch() -> None:
            # CuPy must launch on torch's current stream, or a torch graph capture records nothing.
            with self._cupy_stream(torch.cuda.current_stream().cuda_stream):
                fn(lc.grid, lc.block, args, shared_mem=lc.shared_bytes)

        return launch

    def _cupy_stream(self, ptr: int):
        if ptr not in self._streams:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                self._streams[ptr] = self.cupy.cuda.ExternalStream(ptr)
        return self._streams[ptr]

    def _sync(self) -> None:
        try:
            self.torch.cuda.synchronize()
        except Exception as e:  # an illegal address or trap poisons the whole context
            raise KernelCrash(str(e).splitlines()[0]) from None

    # --- data --------------------------------------------------------------
    def inputs(self, g: Geometry, seed: int) -> dict[str, Any]:
        """The seeded inputs, made once; a copy of each is kept to see a launch that writes one (_written_inputs),
        and the family's in-out outputs are held against them (a FamilyError of one line)."""
        key = (g.name, seed)
        if key not in self._inputs:
            with self.torch.cuda.stream(self.stream):
                with calling(self.family.name, "make_inputs()"):
                    inputs = self.family.make_inputs(g, seed, self.device)
                problem = inout_problem(self.family.outputs(g), inputs)
                if problem:
                    raise FamilyError(f"family {self.family.name} at {g.name}: {problem}")
                self._pristine[key] = snapshot(inputs)
            self.stream.synchronize()
            self._inputs[key] = inputs
        return self._inputs[key]

    def _written_inputs(self, g: Geometry, seed: int) -> list[tuple[str, int]]:
        """Inputs the last launches changed (input, elements), each set back to what make_inputs gave."""
        changed = written_inputs(self._inputs[(g.name, seed)], self._pristine[(g.name, seed)])
        if changed:
            self._sync()  # the copies back ran on the current stream; the next launch goes on self.stream
        return changed

    def reference(self, g: Geometry, seed: int) -> dict[str, Any]:
        key = (g.name, seed)
        if key not in self._refs:
            inputs = self.inputs(g, seed)
            with calling(self.family.name, "reference()"):
                self._refs[key] = self.family.reference(inputs, g)
            self.torch.cuda.synchronize()
        return self._refs[key]

    def _outputs(self, g: Geometry) -> dict[str, Any]:
        """Output buffers for correctness runs, each the middle of a larger allocation with guard bands."""
        if g.name not in self._outbuf:
            torch = self.torch
            bufs, guards = {}, {}
            for o in self.family.outputs(g):
                dt = _dtype(o.dtype)
                n = 1
                for d in o.shape:
                    n *= d
                pad = GUARD_BYTES // torch.empty((), dtype=dt).element_size()
                full = torch.empty(n + 2 * pad, dtype=dt, device=self.device)
                full.view(torch.uint8).fill_(GUARD)
                bufs[o.name] = full[pad : pad + n].view(o.shape)
                guards[o.name] = (full[:pad], full[pad + n :])
            self._outbuf[g.name] = bufs
            self._guards[g.name] = guards
        return self._outbuf[g.name]

    def _guard_damage(self, g: Geometry, name: str) -> int:
        """Bytes of the guard bands around ``name`` that no longer hold the guard pattern; re-arms them."""
        torch = self.torch
        bad = 0
        for band in self._guards[g.name][name]:
            b = band.view(torch.uint8)
            bad += int((b != GUARD).sum().item())
            if bad:
                b.fill_(GUARD)
        return bad

    def _errors(self, out, ref) -> tuple[float, float]:
        torch = self.torch
        d = out.to(torch.float64) - ref
        rel = (torch.linalg.vector_norm(d) / torch.linalg.vector_norm(ref).clamp_min(1e-300)).item()
        return rel, d.abs().max().item()

    def _mismatch(self, got, want) -> str:
        torch = self.torch
        diff = _int_view(got) != _int_view(want)
        n = int(diff.sum().item())
        if n == 0:
            return ""
        idx = int(diff.flatten().nonzero()[0].item())
        g = got.flatten()[idx].item()
        w = want.flatten()[idx].item()
        mad = (got.to(torch.float64) - want.to(torch.float64)).abs().max().item()
        return (
            f"{n} of {got.numel()} elements differ ({100.0 * n / got.numel():.2f}%), first at flat index {idx}: "
            f"got {g:.6g}, want {w:.6g}; max abs diff {mad:.3g}"
        )

    # --- correctness --------------------------------------------------------
    def correctness(self, loaded: Loaded, *, freeze: bool = False) -> CorrectnessEvidence:
        """Poison, launch, hash: every geometry x seed x run. ``freeze`` keeps the outputs as the baseline's.

        An in-out output (``OutputSpec.init_from``) starts each run as a copy of its input instead of the poison;
        after each launch every input is compared with the copy kept as it was made (a change is recorded in
        ``written_inputs`` and set back). Checks look at the family's written view of the outputs (what this
        genome must write) and errors at its compare view (what matches the float64 reference).
        """
        torch, fam = self.torch, self._fam(loaded)  # (a peer's outputs are held against the campaign's reference)
        ev = CorrectnessEvidence()
        for g in self.geometries:
            outs = self._outputs(g)
            specs = fam.outputs(g)
            for seed in range(self.seeds):
                inputs = self.inputs(g, seed)
                key = (g.name, seed)
                initial = initial_values(specs, inputs)  # the in-out outputs start as their inputs, not poisoned
                ref = self.reference(g, seed) if initial else None  # (before any launch could touch an input)
                per_output: dict[str, OutputCheck] = {}
                for run in range(self.runs):
                    with torch.cuda.stream(self.stream):
                        start_outputs(outs, initial, POISON[run % 2])
                        self._launcher(loaded, g, inputs, outs)()
                    self._sync()
                    for name, n in self._written_inputs(g, seed):
                        ev.written_inputs.append(InputWrite(g.name, seed, name, n, inputs[name].numel()))
                    for name in outs:
                        oob = self._guard_damage(g, name)
                        if oob:
                            per_output.setdefault(name, OutputCheck(g.name, seed, name, [])).oob_bytes += oob
                    written = fam.written_view(outs, loaded.genome, g)
                    compared = None
                    for name, t in written.items():
                        hkey = f"{g.name}/{seed}/{name}"
                        chk = per_output.setdefault(name, OutputCheck(g.name, seed, name, []))
                        iv = _int_view(t)
                        if name not in initial:  # an in-out output holds no poison: _unwritten_inout counts it
                            poisoned = int((iv == _poison_value(t, POISON[run % 2])).sum().item())
                            chk.unwritten = max(chk.unwritten, poisoned)
                        if t.is_floating_point():
                            chk.nonfinite = max(chk.nonfinite, int((~torch.isfinite(t)).sum().item()))
                        base = self._base_out.get(key, {}).get(name)
                        same_as_base = base is not None and base.shape == t.shape and torch.equal(iv, _int_view(base))
                        if freeze and run == 0:
                            self._base_out.setdefault(key, {})[name] = t.clone()
                            h = sha256_tensor(t)
                            self.baseline_hashes[hkey] = h
                        elif same_as_base:
                            h = self.baseline_hashes[hkey]
                        else:
                            h = sha256_tensor(t)
                        if run == 0 and (freeze or not same_as_base):
                            compared = compared if compared is not None else fam.compare_view(outs, loaded.genome, g)
                            chk.rel_err, chk.max_abs = self._errors(compared[name], self.reference(g, seed)[name])
                            if freeze:
                                self.baseline_errors[hkey] = chk.rel_err
                            elif base is not None:
                                chk.mismatch = self._mismatch_views(compared[name], key, name, g)
                        if run == 0 and seed == 0:
                            loaded.hashes[f"{g.name}/{name}"] = h
                        chk.hashes.append(h)
                    if initial:
                        self._unwritten_inout(loaded, g, outs, initial, ref, per_output)
                for chk in per_output.values():
                    if chk.rel_err is None:
                        chk.rel_err = self.baseline_errors.get(f"{g.name}/{seed}/{chk.output}")
                ev.checks.extend(per_output.values())
        return ev

    def _unwritten_inout(self, loaded: Loaded, g: Geometry, outs, initial, ref, per_output) -> None:
        """The never-written check of in-out outputs (which start as their input, not poisoned): elements where
        the float64 reference changes the value and the output still holds its initial bits
        (harness.inout.unwritten_inout), compared where the family compares outputs with the reference."""
        fam = self._fam(loaded)
        got = fam.compare_view(outs, loaded.genome, g)
        start = fam.compare_view({**outs, **initial}, loaded.genome, g)
        for name in initial:
            chk = per_output.get(name)  # (an output the written view holds)
            if chk is None or name not in got or name not in ref or got[name].shape != ref[name].shape:
                continue
            chk.unwritten = max(chk.unwritten, unwritten_inout(got[name], start[name], ref[name]))

    def _mismatch_views(self, got, key: tuple[str, int], name: str, g: Geometry) -> str:
        """First difference between this output and the baseline's, compared as the family compares them."""
        base = self._base_out.get(key, {})
        want = self.family.compare_view(_Padded(base, self._outputs(g)), self.family.baseline(), g).get(name)
        if want is None or want.shape != got.shape:
            return ""
        return self._mismatch(got, want)

    def recheck(self, loaded: Loaded) -> str | None:
        """After timing: poison once more (an in-out output set from its input again: timing left it drifted),
        launch once; the output must still hash as in the correctness run, and no input may have changed."""
        torch = self.torch
        for g in self.geometries:
            outs = self._outputs(g)
            inputs = self.inputs(g, 0)
            with torch.cuda.stream(self.stream):
                start_outputs(outs, initial_values(self.family.outputs(g), inputs), POISON[1])
                self._launcher(loaded, g, inputs, outs)()
            self._sync()
            for name, n in self._written_inputs(g, 0):
                return f"the kernel wrote its input {name} at {g.name} ({n} of {inputs[name].numel()} elements)"
            for name, t in self.family.written_view(outs, loaded.genome, g).items():
                want = loaded.hashes.get(f"{g.name}/{name}")
                if want is not None and sha256_tensor(t) != want:
                    base = self._base_out.get((g.name, 0), {}).get(name)
                    detail = self._mismatch(t, base) if base is not None and base.shape == t.shape else ""
                    return f"{name} at {g.name} changed after the timed runs" + (f": {detail}" if detail else "")
        return None

    # --- timing -------------------------------------------------------------
    def _graph(self, launch, n: int):
        torch = self.torch
        with torch.cuda.stream(self.stream):
            launch()  # warm-up outside capture (module load, first-touch)
        self._sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            for _ in range(n):
                launch()
        self._sync()
        return graph

    def _time_graph(self, graph) -> float:
        torch = self.torch
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            e0.record()
            graph.replay()
            e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1) * 1000.0

    def _warm_up(self, graphs, seconds: float = 1.5) -> None:
        """Replay until the GPU has been busy for a while, so the SM clock has left idle before any sample."""
        first = not self._warmed
        t0 = time.perf_counter()
        while True:
            for g in graphs:
                self._time_graph(g)
            if not first or time.perf_counter() - t0 >= seconds:
                break
        self._warmed = True

    def launches_for(self, loaded: Loaded, g: Geometry) -> int:
        """N so that a graph of N launches takes about batch_ms."""
        outs = self._timing_outputs(g, self._fam(loaded))
        launch = self._launcher(loaded, g, self.inputs(g, 0), outs)
        graph = self._graph(launch, 5)
        self._time_graph(graph)
        us = min(self._time_graph(graph) for _ in range(3)) / 5
        return int(min(2000, max(3, round(self.batch_ms * 1000.0 / max(us, 0.5)))))

    def _timing_outputs(self, g: Geometry, fam: Family | None = None) -> dict[str, Any]:
        """Exact-size output buffers for timing. An in-out output is set from its input once, here, before the
        graphs are captured; the launches then run in place on it, as the engine's own loop does (its values drift
        from launch to launch, e.g. a residual accumulates: docs/measurement.md, "In-place outputs"). ``fam``: the
        family whose outputs say which start as inputs (a peer's, where it works in place and the campaign's not)."""
        with self.torch.cuda.stream(self.stream):
            outs = fresh_outputs((fam or self.family).outputs(g), self.inputs(g, 0), self.device)
        self._sync()
        return outs

    def measure(
        self,
        parts: Sequence[tuple[str, Loaded]],
        g: Geometry,
        rounds: int,
        launches: int | Mapping[str, int] | None = None,
        stop: Any = None,
    ) -> Samples:
        """Interleave the parts for ``rounds`` rounds; return µs per launch of each, throttled rounds removed.

        ``launches``: the launches in each part's graph, one count for all, or label -> count (a campaign sizes each
        part's graph for that part, to about batch_ms); None sizes every graph for the first part."""
        if isinstance(launches, Mapping):
            counts = {lb: int(launches[lb]) for lb, _ in parts}
        else:
            n = launches or self.launches_for(parts[0][1], g)
            counts = {lb: n for lb, _ in parts}
        inputs = self.inputs(g, 0)
        # One set of output buffers for every part: the parts run one after another, and a candidate must not
        # win or lose by where its buffers landed in HBM. (Suspect, not yet proven: with a buffer set per part,
        # the A/A floor of the HBM-bound T4096_H7168 stayed at 0.34% over 300 rounds on the H200, an offset
        # that more rounds did not shrink; benchmarks/results/2026-11-30-mhc-pre-big-fuse-campaign-early-out.)
        outs = self._timing_outputs(g, in_place([self.family, *(self._fam(x) for _, x in parts)], g))
        graphs = {}
        for label, loaded in parts:
            graphs[label] = (self._graph(self._launcher(loaded, g, inputs, outs), counts[label]), outs)
        self._warm_up([g for g, _ in graphs.values()])
        labels = [p[0] for p in parts]
        times: dict[str, list[float]] = {lb: [] for lb in labels}
        discarded = 0
        sm = []
        reasons = 0
        early = False
        for r in range(rounds):
            order = labels[r % len(labels) :] + labels[: r % len(labels)]
            got: dict[str, float] = {}
            throttled = False
            for lb in order:
                before = self.clock()
                us = self._time_graph(graphs[lb][0]) / counts[lb]
                after = self.clock()
                for c in (before, after):
                    if c is not None:
                        sm.append(c.sm_mhz)
                        if c.throttled:
                            throttled = True
                            reasons |= c.reasons
                got[lb] = us
            if throttled:
                discarded += 1
                continue
            for lb in labels:
                times[lb].append(got[lb])
            if stop is not None and stop.hit(times):
                early = True
                break
        clocks = {
            "sm_mhz_min": min(sm) if sm else None,
            "sm_mhz_max": max(sm) if sm else None,
            "throttled_samples": discarded,
            "throttle_reasons": reasons,
        }
        del graphs
        return Samples(times, discarded, dict(counts) if isinstance(launches, Mapping) else n, clocks, early)

    # --- ceilings and peers -------------------------------------------------
    def _empty_launcher(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], pdl: bool) -> Any:
        """A zero-argument launch of the empty kernel on the current torch stream (as ``_launcher`` launches)."""
        torch = self.torch
        if pdl:
            from harness.driver_launch import launcher

            ex = launcher(fn.kernel.ptr, grid, block, 0, "", (), pdl=True)
            return lambda: ex(torch.cuda.current_stream().cuda_stream)

        def launch() -> None:
            with self._cupy_stream(torch.cuda.current_stream().cuda_stream):
                fn(grid, block, ())

        return launch

    def latency_floor(
        self, grids: Mapping[str, Mapping[str, Sequence[int]]], rounds: int = 12, pdl: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Per geometry, µs per launch of an empty kernel with that geometry's grid and block (``grids``: name ->
        {"grid": [x, y, z], "block": [x, y, z]}), timed as candidates are: CUDA graphs of about batch_ms of its own
        launches, warmed up, the median of ``rounds`` replays; PDL launches (programmatic stream serialization)
        when ``pdl``. Throttled replays (NVML) are dropped and counted, as in ``measure``."""
        cupy = self.cupy
        fn = cupy.RawModule(code=EMPTY_KERNEL, options=empty_kernel_options(pdl)).get_function(EMPTY_KERNEL_NAME)
        out: dict[str, dict[str, Any]] = {}
        for name, shape in grids.items():
            grid = tuple(int(v) for v in shape["grid"])
            block = tuple(int(v) for v in shape["block"])
            launch = self._empty_launcher(fn, grid, block, pdl)
            probe = self._graph(launch, 5)
            self._time_graph(probe)
            us = min(self._time_graph(probe) for _ in range(3)) / 5
            n = int(min(2000, max(3, round(self.batch_ms * 1000.0 / max(us, 0.5)))))
            graph = self._graph(launch, n)
            self._warm_up([graph])
            times, dropped = [], 0
            for _ in range(rounds):
                before = self.clock()
                t = self._time_graph(graph) / n
                after = self.clock()
                if any(c is not None and c.throttled for c in (before, after)):
                    dropped += 1
                    continue
                times.append(t)
            times.sort()
            out[name] = {
                "us": times[len(times) // 2] if times else None,
                "launches": n,
                "replays": len(times),
                "discarded": dropped,
                "grid": list(grid),
                "block": list(block),
                "launch": "pdl" if pdl else "plain",
            }
            del graph, probe
        return out

    def copy_ceiling(self, gib: float = 4.0, reps: int = 10, trials: int = 3) -> dict[str, Any]:
        """Device-to-device copy bandwidth (bytes read + written): the roofline every "% of ceiling" divides by.

        Buffers of ``gib`` GiB (docs/measurement.md, "copy ceiling"); our 16-byte copy kernel at 4, 8 and 16 blocks an
        SM and cupy.copyto, each the median of ``reps`` timed copies after an untimed one; ``trials`` times, on fresh
        buffers each; the ceiling is the best of them all, since a ceiling is what a copy reached, not what it
        usually reaches. (One trial of 1 GiB read 3.92-4.07 TB/s in one process where 4 GiB read 4.14-4.23,
        benchmarks/results/2026-12-01-copy-ceiling-1gib-vs-4gib.) Every trial's figures are kept beside the result.
        """
        cupy = self.cupy
        src = r"""
        extern "C" __global__ void copy16(const uint4* __restrict__ a, uint4* __restrict__ b, unsigned long long n) {
          for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
               i += (unsigned long long)gridDim.x * blockDim.x) b[i] = a[i];
        }"""
        k = cupy.RawKernel(src, "copy16", options=("-std=c++17",))
        sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]

        def best(fn, n16: int) -> float:
            fn()
            cupy.cuda.Device().synchronize()
            ts = []
            for _ in range(reps):
                e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                ts.append(cupy.cuda.get_elapsed_time(e0, e1) / 1000.0)
            ts.sort()
            return 2 * n16 * 16 / ts[len(ts) // 2] / 1e12

        rows = []
        for _ in range(trials):
            while True:  # a smaller copy where the device cannot hold two buffers of gib
                n16 = int(gib * 2**30) // 16
                try:
                    a = cupy.random.random(n16 * 2, dtype=cupy.float64)  # random, never zeros
                    b = cupy.empty_like(a)
                    break
                except cupy.cuda.memory.OutOfMemoryError:
                    if gib <= 0.25:
                        raise
                    gib /= 2
            own = max(
                best(lambda bl=bl, a=a, b=b, n16=n16: k((sms * bl,), (256,), (a, b, cupy.uint64(n16))), n16)
                for bl in (4, 8, 16)
            )
            copyto = best(lambda a=a, b=b: cupy.copyto(b, a), n16)
            rows.append({"own_kernel_tbps": round(own, 3), "copyto_tbps": round(copyto, 3)})
            del a, b
            cupy.get_default_memory_pool().free_all_blocks()
        own = max(r["own_kernel_tbps"] for r in rows)
        copyto = max(r["copyto_tbps"] for r in rows)
        return {
            "own_kernel_tbps": own,
            "copyto_tbps": copyto,
            "ceiling_tbps": max(own, copyto),
            "bytes": 2 * n16 * 16,
            "method": f"best of {len(rows)} trials, {reps} copies of {gib:g} GiB each",
            "trials": rows,
        }

    def peer_torch_compile(self, mode: str, geometries: Sequence[Geometry]) -> dict[str, Any]:
        """torch.compile of the float32 reference, timed apart once in set-up (harness/torch_peer.py)."""
        return torch_peer.time_apart(self, mode, geometries)

    def prepare_torch_peer(self, loaded: torch_peer.TorchPart, geometries: Sequence[Geometry]) -> dict[str, Any]:
        """torch.compile of the reference compiled at each geometry before it is timed as a peer (evo/loop/peers.py)."""
        return torch_peer.prepare(self, loaded, geometries)


def gpu_available() -> bool:
    return gpu_problem() is None


def _cuda(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def gpu_problem() -> str | None:
    """Why the GPU backend cannot run here (one line), or None when a CUDA GPU is usable. Called by the backend
    choice (evo/loop/campaign.py make_backend).

    An NVIDIA driver older than the CUDA of the installed CuPy (a CUDA 12 driver under ``cupy-cuda13x``) reads
    as no device at all to CuPy (cudaErrorInsufficientDriver, what a machine with no driver also gets); the
    driver's own version tells the two apart, so such a machine is told what to install, never taken for one
    without a GPU."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
    except Exception:  # noqa: BLE001 - any CuPy failure: nothing usable; the driver's version says why
        pass
    try:
        import cupy

        driver, runtime = cupy.cuda.runtime.driverGetVersion(), cupy.cuda.runtime.runtimeGetVersion()
    except Exception:  # noqa: BLE001
        return "no CUDA GPU is visible"
    if 0 < driver < runtime:
        return (
            f"the NVIDIA driver supports CUDA {_cuda(driver)} and the installed CuPy needs CUDA {_cuda(runtime)}: "
            'update the driver to one for that CUDA (README, "CUDA 12")'
        )
    return "no CUDA GPU is visible"
