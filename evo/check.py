"""`evo check CONFIG`: is this family ready for a campaign? Answered on a CPU machine, in one final line.

In order, stopping at the first problem: the config and its family load (knobs, geometries, the entry point);
the baseline is valid at every geometry; NVRTC compiles the baseline and a seeded random sample of genomes at
every specialization (ptxas's registers, spills and stack frame through the static gate, against the baseline's;
arg_types against each cubin's parameter layout, evo/check_params.py);
``make_inputs`` and ``reference`` run on the CPU at the family's small geometry (random, finite, seed-dependent
inputs; finite outputs keyed like ``outputs``); and, where a CUDA GPU is visible, the baseline passes the
campaign's own baseline check against float64 (every output within the family's error bound, no race).
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.config import CampaignConfig, ConfigError, load_config
from evo.core.family import Family, FamilyError, Geometry, inout_problem
from evo.core.genome import Genome
from evo.core.hooks import FamilyHookError, reason, trace
from evo.core.variant import LaunchError, Variant, inert_knobs, launch_digest
from evo.measure.peer_kernels import check_peers

NOT_CHECKED = "evo check: not checked: "  # a final line that starts so: exit 3 (README "Exit codes")
CONFIG_ERROR = "config error: "  # a FAIL line that starts so is a usage error (exit 2, as for every command)


class CheckFailed(Exception):
    """The first problem found (one line)."""


class NotCheckable(Exception):
    """Nothing here that `evo check` could check (one line): exit 3, "could not check", never "clean" or "failed"."""


@dataclass
class CheckReport:
    facts: list[str] = field(default_factory=list)  # what passed, for the final line
    notes: list[str] = field(default_factory=list)  # worth knowing, not a failure


def sample_genomes(family: Family, geometries: list[Geometry], n: int, seed: int = 0) -> list[Genome]:
    """Up to ``n`` distinct valid genomes other than the baseline (none for ``n`` 0), drawn knob by knob (the space
    may be huge), first so that every knob value appears in one where a valid genome holds it (a value that does
    not compile is found whatever the seed), however many that takes beyond ``n``; then at random."""
    rng = random.Random(seed)
    base = family.baseline()
    out: dict[str, Genome] = {}
    if n <= 0:
        return []
    todo = {(k.name, v) for k in family.knobs for v in k.values if v != k.default}
    for _ in range(50 * len(todo)):
        if not todo:
            break
        values = {}
        for k in family.knobs:
            left = [v for v in k.values if (k.name, v) in todo]
            values[k.name] = rng.choice(left) if left and rng.random() < 0.5 else rng.choice((k.default, *k.values))
        g = base.replace(**values)
        new = {(k, v) for k, v in values.items() if (k, v) in todo}
        if new and g.key not in out and _valid(family, g, geometries):
            out[g.key] = g
            todo -= new
    for _ in range(50 * n):
        if len(out) >= n:
            break
        g = base.replace(**{k.name: rng.choice(k.values) for k in family.knobs})
        if g.key != base.key and g.key not in out and _valid(family, g, geometries):
            out[g.key] = g
    return list(out.values())


def _family_call(what: str, f: Callable[..., Any], *args: Any) -> Any:
    """A method of the user's family: NotImplementedError (a stub) or whatever else it raises, as one line."""
    trace("", what)
    try:
        return f(*args)
    except NotImplementedError as e:
        raise CheckFailed(f"{what}: {e or 'not written yet'}") from None
    except CheckFailed:
        raise
    except FamilyHookError as e:  # named the family and the hook already
        raise CheckFailed(str(e)) from None
    except Exception as e:  # noqa: BLE001 - the family's code: one line, whatever it raised
        raise CheckFailed(f"{what} raised {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None


def _valid(family: Family, genome: Genome, geometries: list[Geometry]) -> bool:
    what = f"check({genome.key})"
    return reason(family, what, _family_call(what, family.check, genome, geometries)) is None


MAX_THREADS, MAX_SHARED, REGISTERS = 1024, 227 * 1024, 65536  # a block on sm_90: threads, shared bytes, registers


def check_launches(fam: Family, cfg: CampaignConfig, compiled: list[tuple[Genome, Any]], builder: Any) -> None:
    """launch() for each compiled genome at every geometry: a Launch within what a block may have on the GPU, with
    the registers and static shared memory its module was compiled to (a CPU never launches; the GPU would refuse
    it at every attempt)."""
    from evo.core.family import Launch

    for genome, built in compiled:
        for g in cfg.geometries:
            lc = _family_call(f"launch({genome.key}) at {g.name}", fam.launch, genome, g)
            where = f"launch({genome.key}) at {g.name}"
            if not isinstance(lc, Launch):
                raise CheckFailed(f"{where} gives a {type(lc).__name__}, not a Launch(grid, block, shared_bytes)")
            dims = [*lc.grid, *lc.block]
            if len(lc.grid) != 3 or len(lc.block) != 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
                raise CheckFailed(f"{where}: grid {lc.grid} and block {lc.block} must be three whole numbers >= 1 each")
            threads = lc.block[0] * lc.block[1] * lc.block[2]
            if threads > MAX_THREADS:
                raise CheckFailed(f"{where}: a block of {threads} threads (a block holds at most {MAX_THREADS})")
            if lc.grid[1] > 65535 or lc.grid[2] > 65535:
                raise CheckFailed(f"{where}: grid {lc.grid} (y and z at most 65535)")
            res = built.modules[builder.spec_of(g)].resources
            if res.registers * threads > REGISTERS:
                raise CheckFailed(
                    f"{where}: {threads} threads x {res.registers} registers is over the {REGISTERS} an SM holds "
                    "(__launch_bounds__ makes ptxas fit them)"
                )
            if not isinstance(lc.shared_bytes, int) or lc.shared_bytes < 0:
                raise CheckFailed(f"{where}: shared_bytes {lc.shared_bytes!r} must be a whole number >= 0")
            if lc.shared_bytes + res.shared_static > MAX_SHARED:
                raise CheckFailed(
                    f"{where}: {lc.shared_bytes} B dynamic + {res.shared_static} B static shared memory is over the "
                    f"{MAX_SHARED} B a block may have"
                )


def small_geometry(family: Family, cfg: CampaignConfig) -> Geometry:
    """The family's own small geometry, else the config's geometry that moves the fewest bytes."""
    g = family.small_geometry()
    if g is not None:
        return g
    return min(cfg.geometries, key=lambda x: (family.bytes_moved(x) or 0, x.name))


def check_compile(
    cfg: CampaignConfig, report: CheckReport, sample: int, seed: int, say: Callable[[str], None]
) -> tuple[Any, Any]:
    """The baseline and a sample of genomes compiled, within the static gate, their launches, and arg_types held on
    every module's parameters; returns (the builder, the baseline's Built)."""
    from evo.search import Proposal
    from gates.judge import JudgeContext, judge
    from harness.build import Builder, BuildError

    fam = cfg.family
    try:
        builder = Builder.for_config(cfg)
    except BuildError as e:
        raise CheckFailed(str(e)) from None
    base = fam.baseline()
    try:
        built = builder.build(base)
    except BuildError as e:
        raise CheckFailed(f"the baseline does not compile: {e}") from None
    base_res = {k: m.resources for k, m in built.modules.items()}
    if builder.route_note:  # compiler: auto said which it took, once
        say(f"  {builder.route_note}")
    for k, r in sorted(base_res.items()):
        say(
            f"  baseline [{k}] ({builder.arch}, {built.modules[k].compiler}): {r.registers} registers, "
            f"{r.spill_stores} B spill stores, {r.stack_frame} B stack, {r.shared_static} B static shared"
        )
    rejected = 0
    ctx = JudgeContext.standalone(cfg, builder=builder, base_resources=base_res)  # the judge's static gate
    genomes = sample_genomes(fam, list(cfg.geometries), sample, seed)
    compiled = [(base, built)]
    for g in genomes:
        try:
            b = builder.build(g)
        except BuildError as e:
            raise CheckFailed(f"genome {g.key} does not compile ({e}); refuse it in check() if it is invalid") from None
        compiled.append((g, b))
        v, _ = judge(Proposal(g, "evo check"), ctx, only=("static",), built=b)
        if not v.ok:
            rejected += 1
            say(f"  {g.key}: rejected by the static gate ({v.reason})")
    check_launches(fam, cfg, compiled, builder)
    variants = Variants(cfg, builder, dict(compiled))
    inert = variants.inert() if genomes else []  # (one-knob genomes compiled on demand: --sample 0 asks for none)
    extra = [(g, b) for g, b in variants.built.items() if g not in dict(compiled)]
    check_launches(fam, cfg, extra, builder)
    check_layouts(fam, compiled)
    held = {(k, v) for g in genomes for k, v in g.items()}
    missing = [f"{k.name}={v!r}" for k in fam.knobs for v in k.values if v != k.default and (k.name, v) not in held]
    report.facts.append(
        f"baseline and {len(genomes)} sampled genome{'s' if len(genomes) != 1 else ''} compiled ("
        + ("every knob value in one, " if genomes and not missing else "")
        + f"{variants.describe()}"
        + (
            f", {len(extra)} one-knob genome{'s' if len(extra) != 1 else ''} to see what each knob changes"
            if extra
            else ""
        )
        + (f", {rejected} over the static gate" if rejected else "")
        + ")"
    )
    if genomes and missing:
        report.notes.append(
            f"no valid sampled genome holds {', '.join(missing[:6])}"
            + (" ..." if len(missing) > 6 else "")
            + " (check() refused every one drawn): those values were not compiled"
        )
    if genomes and len(variants.distinct()) == 1:
        report.notes.append(
            "every sampled genome gave the baseline's machine code and launch: do the knobs reach the kernel?"
        )
    else:
        for k in inert:
            report.notes.append(f"knob {k} changes neither the machine code nor the launch: does it reach the kernel?")
    return builder, built


def _small_layout(cfg: CampaignConfig, geo: Geometry, built: Any, builder: Any) -> Any:
    """The baseline's parameter layout at the small geometry (its module, built here when no config geometry
    shares its specialization); CheckFailed where the cubin cannot say."""
    from evo.check_params import read_layout
    from harness.build import Builder, BuildError

    mod = built.modules.get(builder.spec_of(geo))
    if mod is None:
        try:
            small = Builder.for_config(cfg, geometries=[geo])
            mod = small.build(cfg.family.baseline()).modules[small.spec_of(geo)]
        except BuildError as e:
            raise CheckFailed(f"the baseline does not compile at {geo.name}: {e}") from None
    layout, problem = read_layout(mod)
    if problem:
        raise CheckFailed(problem)
    return layout


class Variants:
    """The compiled genomes of ``evo check`` by variant (machine code x launch, evo/core/variant.py): counted for
    the report, and asked which knobs change neither (a one-knob genome compiled only where its launch is the
    baseline's)."""

    def __init__(self, cfg: CampaignConfig, builder: Any, built: Mapping[Genome, Any]):
        self.cfg, self.builder = cfg, builder
        self.pdl = cfg.gates.perf.launch == "pdl"
        self.built = dict(built)
        self.launches: dict[Genome, str] = {}
        self.known = {g: Variant(b.sass_sha256, self.launch_of(g)) for g, b in self.built.items()}

    def launch_of(self, genome: Genome) -> str:
        if genome not in self.launches:
            try:
                self.launches[genome] = launch_digest(self.cfg.family, genome, self.cfg.geometries, self.pdl)
            except LaunchError as e:
                raise CheckFailed(str(e)) from None
        return self.launches[genome]

    def sass_of(self, genome: Genome) -> str:
        from harness.build import BuildError

        if genome not in self.built:
            try:
                self.built[genome] = self.builder.build(genome)
            except BuildError as e:
                raise CheckFailed(
                    f"genome {genome.key} does not compile ({e}); refuse it in check() if it is invalid"
                ) from None
            self.known[genome] = Variant(self.built[genome].sass_sha256, self.launch_of(genome))
        return str(self.built[genome].sass_sha256)

    def inert(self) -> list[str]:
        fam = self.cfg.family
        return inert_knobs(fam, self.launch_of, self.sass_of, lambda g: _valid(fam, g, list(self.cfg.geometries)))

    def distinct(self) -> set[str]:
        return {v.key for v in self.known.values()}

    def describe(self) -> str:
        """ "N distinct variants (code x launch)", with the count of machine codes where it is smaller."""
        n, codes = len(self.distinct()), len({v.sass_sha256 for v in self.known.values()})
        word = "variant" if n == 1 else "variants"
        of_code = f"; {codes} machine code{'s' if codes != 1 else ''}" if codes < n else ""
        return f"{n} distinct {word} (code x launch{of_code})"


def _tensors(d: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    return {k: v for k, v in d.items() if isinstance(v, torch.Tensor)}


def check_layouts(fam: Family, compiled: list[tuple[Genome, Any]]) -> None:
    """arg_types against the parameters of every compiled module (the baseline's and the sampled genomes'), read
    from each cubin: count and sizes, whatever the signature looks like as text (a knob may change a type)."""
    from evo.check_params import arg_types_problem, hold, read_layout, signature

    types = _family_call("arg_types", fam.arg_types)
    problem = arg_types_problem(types)
    if problem:
        raise CheckFailed(problem)
    params = signature(fam)
    for genome, built in compiled:
        for key, mod in sorted(built.modules.items()):
            layout, problem = read_layout(mod)
            if layout is not None:
                problem = hold(fam, types, layout, params=params)
            if problem:
                where = "" if genome.key == fam.baseline().key else f" (genome {genome.key}"
                where += f" [{key}])" if where else (f" ([{key}])" if len(built.modules) > 1 else "")
                raise CheckFailed(problem + where)


def check_inout_args(specs: list[Any], inputs: Mapping[str, Any], args: list[Any]) -> None:
    """kernel_args passes an in-out output, never the input it starts from: the kernel writes that pointer, and
    evo's inputs are read-only (the GPU would reject every genome, the baseline first, as writing its input)."""
    import torch

    for o in specs:
        src = inputs.get(o.init_from) if o.init_from is not None else None
        if not isinstance(src, torch.Tensor):
            continue
        for i, v in enumerate(args):
            if isinstance(v, torch.Tensor) and v.numel() and v.data_ptr() == src.data_ptr():
                raise CheckFailed(
                    f"kernel_args[{i}] is the input {o.init_from}, which output {o.name} starts from: pass "
                    f"outputs[{o.name!r}] there (the kernel writes it; inputs stay as make_inputs gave them)"
                )


def check_arguments(
    fam: Family, inputs: Mapping[str, Any], geo: Geometry, ref: Mapping[str, Any], layout: Any = None
) -> None:
    """What only the GPU would otherwise find: the reference's shapes against the compared outputs, each in-out
    output's init_from against the inputs (a tensor of its dtype and size), kernel_args against arg_types (count
    and kinds) and, given ``layout`` (the baseline's parameters at ``geo``, from its cubin), each value's size
    against its parameter's (an ``s`` value of 12 bytes where the kernel takes 16)."""
    import torch

    from evo.check_params import arg_types_problem, hold, signature
    from harness.kernel_params import struct_bytes

    def call(what: str, f: Callable[[], Any]) -> Any:
        return _family_call(f"{what} at {geo.name}", f)

    types = call("arg_types", fam.arg_types)
    problem = arg_types_problem(types)
    if problem:
        raise CheckFailed(problem)
    specs = call("outputs", lambda: fam.outputs(geo))
    for o in specs:
        if not isinstance(getattr(torch, str(o.dtype), None), torch.dtype):
            raise CheckFailed(f"outputs: {o.name} has dtype {o.dtype!r}: a torch dtype's name (bfloat16, float32, ...)")
    inout = inout_problem(specs, inputs)  # an in-out output starts as a copy of its input (OutputSpec.init_from)
    if inout:
        raise CheckFailed(f"outputs at {geo.name}: {inout}")
    outs = {o.name: torch.empty(o.shape, dtype=getattr(torch, o.dtype)) for o in specs}
    view = call("compare_view", lambda: fam.compare_view(outs, fam.baseline(), geo))
    for k, t in ref.items():
        if k in view and tuple(t.shape) != tuple(view[k].shape):
            raise CheckFailed(
                f"reference {k} at {geo.name} has shape {tuple(t.shape)}, the output compared with it "
                f"{tuple(view[k].shape)} (outputs / compare_view)"
            )
    args = call("kernel_args", lambda: fam.kernel_args(inputs, outs, geo))
    check_inout_args(specs, inputs, args)
    if len(args) != len(types):
        raise CheckFailed(f"kernel_args gives {len(args)} arguments, arg_types {len(types)} letters ({types!r})")
    for i, (t, v) in enumerate(zip(types, args)):
        tensor = isinstance(v, torch.Tensor)
        integral = isinstance(v, numbers.Integral)  # numpy's scalars too, as the launchers take them
        wrong = (
            (t == "p" and not (tensor or integral))
            or (t in "il" and (tensor or not integral))
            or (t in "fd" and (tensor or not isinstance(v, numbers.Real)))
            or (t == "s" and struct_bytes(v) is None)
        )
        if wrong:
            kinds = " (s: bytes, a numpy scalar or array, a ctypes Structure)" if t == "s" else ""
            raise CheckFailed(f"kernel_args[{i}] is a {type(v).__name__}, and arg_types says {t!r} ({types!r}){kinds}")
    if layout is not None:
        problem = hold(fam, types, layout, args, signature(fam))
        if problem:
            raise CheckFailed(f"{problem} (at {geo.name})")


def check_cpu_reference(
    cfg: CampaignConfig, report: CheckReport, say: Callable[[str], None], built: Any = None, builder: Any = None
) -> None:
    """make_inputs and reference on the CPU at the small geometry, and kernel_args there against the baseline
    (``built`` by ``builder``: the layout of its module for that geometry, compiled now if no config geometry
    shares its specialization)."""
    import torch

    fam = cfg.family
    geo = small_geometry(fam, cfg)
    layout = _small_layout(cfg, geo, built, builder) if built is not None else None
    runs: list[dict[str, Any]] = []
    for seed in (0, 1):
        trace(fam.name, f"make_inputs() at {geo.name}")
        try:
            inputs = fam.make_inputs(geo, seed, "cpu")
        except NotImplementedError as e:
            raise CheckFailed(f"make_inputs: {e or 'not written yet'}") from None
        except Exception as e:  # noqa: BLE001 - the family's code: one line, whatever it raised
            raise CheckFailed(f"make_inputs at {geo.name} raised {type(e).__name__}: {e}") from None
        ts = _tensors(inputs)
        if not ts:
            raise CheckFailed(f"make_inputs at {geo.name} gave no torch tensors")
        for k, t in ts.items():
            if t.is_floating_point() and not bool(torch.isfinite(t.float()).all()):
                raise CheckFailed(f"make_inputs: {k} at {geo.name} has NaN/Inf values")
            if t.numel() > 1 and int(torch.count_nonzero(t)) == 0:
                raise CheckFailed(f"make_inputs: {k} at {geo.name} is all zeros (inputs must be random, never zeros)")
        trace(fam.name, f"reference() at {geo.name}")
        try:
            ref = fam.reference(inputs, geo)
        except NotImplementedError as e:
            raise CheckFailed(f"reference: {e or 'not written yet'}") from None
        except Exception as e:  # noqa: BLE001
            raise CheckFailed(f"reference at {geo.name} raised {type(e).__name__}: {e}") from None
        names = [o.name for o in fam.outputs(geo)]
        if not isinstance(ref, Mapping) or set(ref) - set(names) or not ref:
            raise CheckFailed(
                f"reference gives {sorted(ref) if isinstance(ref, Mapping) else type(ref).__name__}; "
                f"outputs are {names}"
            )
        for k, t in ref.items():
            if t.dtype != torch.float64:
                report.notes.append(f"reference {k} is {t.dtype}, not float64")
            if not bool(torch.isfinite(t).all()):
                raise CheckFailed(f"reference: {k} at {geo.name} has NaN/Inf values")
        if not runs:
            check_arguments(fam, inputs, geo, ref, layout)
            again = _tensors(_family_call(f"make_inputs at {geo.name}", fam.make_inputs, geo, seed, "cpu"))
            differ = [k for k in ts if k not in again or not torch.equal(ts[k], again[k])]
            if differ:  # the hashes compare runs on the same inputs: a seed must give them again
                raise CheckFailed(
                    f"make_inputs gives other {', '.join(differ)} for the same seed (seed a torch.Generator with it)"
                )
        runs.append(ts)
    same = [
        k
        for k in runs[0]
        if runs[0][k].shape == runs[1][k].shape and runs[0][k].numel() > 1 and torch.equal(runs[0][k], runs[1][k])
    ]
    if same and len(same) == len(runs[0]):
        raise CheckFailed(f"make_inputs gives the same inputs for seeds 0 and 1 ({', '.join(same)})")
    if not fam.bytes_moved(geo):
        report.notes.append("bytes_moved is 0: no % of the copy ceiling will be shown")
    say(f"  make_inputs and reference on the CPU at {geo.name} {dict(geo.params)}: finite, seed-dependent")
    report.facts.append(f"CPU reference at {geo.name}")


def check_gpu_baseline(cfg: CampaignConfig, report: CheckReport, say: Callable[[str], None]) -> None:
    from gates.judge import reference_problem
    from harness.build import Builder
    from harness.gpu import GpuBackend, gpu_available, gpu_problem

    if not gpu_available():
        why = gpu_problem() or "no CUDA GPU is visible"
        report.facts.append(
            f"{'no GPU here' if why.startswith('no CUDA GPU') else why}: the baseline's correctness on the GPU not run"
        )
        return
    fam = cfg.family
    builder = Builder.for_config(cfg)
    be = GpuBackend.for_config(cfg, builder)
    base = fam.baseline()
    ev = be.correctness(be.load(builder.build(base), base), freeze=True)
    problem = reference_problem(ev, fam.error_bound)
    if problem:
        raise CheckFailed(problem)
    worst = max((c.rel_err or 0.0) for c in ev.checks)
    say(
        f"  GPU: the baseline at {len(cfg.geometries)} geometries x {cfg.gates.correctness.seeds} seeds within "
        f"its error bounds (largest relative error vs float64 {worst:.2e}), same bits every run"
    )
    report.facts.append("GPU baseline correct")


TODO_MARK = "TODO(evo)"  # what `evo new` writes where the user must fill in: a TODO of the user's own is not one


def first_todo(path: Path) -> str | None:
    """The first line of a file that still holds a :data:`TODO_MARK` (what `evo new` left to fill), or None."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for i, line in enumerate(lines, 1):
        if TODO_MARK in line:
            return f"{path.name} line {i}: {line.strip()[:200]}"
    return None


def run_check(
    config: str | Path, *, sample: int = 8, seed: int = 0, gpu: bool = True, say: Callable[[str], None] = print
) -> tuple[bool, str]:
    """All the checks; returns (passed, the final line)."""
    report = CheckReport()
    try:
        todo = first_todo(Path(config))
        if todo:
            raise CheckFailed(todo)
        try:
            cfg = load_config(config)
        except (ConfigError, FamilyError) as e:
            raise CheckFailed(f"{CONFIG_ERROR}{e}") from None
        fam = cfg.family
        if getattr(fam, "recorded_only", False):  # (harness/ktcache.py: measurements only, nothing to compile)
            raise NotCheckable(f"family {fam.name} is a Kernel Tuner cache: no kernel to check; evo run replays it")
        todo = first_todo(fam.folder / "family.py")
        if todo:
            raise CheckFailed(todo)
        say(
            f"family {fam.name} ({fam.folder}): {len(fam.knobs)} knobs, entry {fam.entry}; "
            f"{len(cfg.geometries)} geometries in {Path(config).name}"
        )
        base = fam.baseline()
        inexact = [  # as the campaign asks: a knob with a value that may change bits at some geometry
            k.name
            for k in fam.knobs
            if any(
                k.name in _family_call("inexact_knobs", fam.inexact_knobs, base.replace(**{k.name: v}), g)
                for v in k.values
                if v != k.default
                for g in cfg.geometries
            )
        ]
        if cfg.gates.correctness.mode == "exact" and inexact:
            report.notes.append(
                f"gates.correctness.mode is exact: a genome that moves {', '.join(inexact)} (may change output "
                "bits) is rejected unmeasured; mode: tolerance searches them against float64"
            )
        why = reason(fam, "check(baseline)", _family_call("check(baseline)", fam.check, base, list(cfg.geometries)))
        if why:
            raise CheckFailed(f"the baseline (the knob defaults) is invalid: {why}")
        for title in fam.faults:  # `evo selfcheck` applies each on the GPU: one that no longer applies is found here
            try:
                fam.faulty_source(title)
            except (ValueError, TypeError, IndexError) as e:
                raise CheckFailed(f"faults: {e}") from None
        builder, built = check_compile(cfg, report, sample, seed, say)
        check_cpu_reference(cfg, report, say, built, builder)
        peer = check_peers(cfg, small_geometry(fam, cfg), builder.arch, say)  # peer.kernels (docs/measurement.md)
        if peer:
            raise CheckFailed(peer)
        if gpu:
            check_gpu_baseline(cfg, report, say)
    except (CheckFailed, FamilyHookError) as e:
        return False, f"evo check: FAIL: {e}"
    except NotCheckable as e:
        return False, f"{NOT_CHECKED}{e}"
    for n in report.notes:
        say(f"  note: {n}")
    return True, f"evo check: pass ({fam.name}: " + "; ".join(report.facts) + ")"
