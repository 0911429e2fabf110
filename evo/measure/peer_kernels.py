"""Peer kernels: other kernels of the same problem, timed beside the champion (``peer.kernels`` in a config).

A peer is a kernel family (a folder, a name, or a campaign config whose ``family:`` names one) with one genome of it:
the kernel an engine ships today made a family, as ``examples/engines/*`` are. It must solve the campaign's problem,
and only its kernel may differ (docs/measurement.md, "Peers"):

- the same geometry parameters, every campaign geometry one it takes (the peer is timed at each);
- the same outputs at every geometry (names, dtypes, shapes): checked against the campaign family's float64
  reference with that family's error bounds; ``init_from`` may differ (an in-place engine kernel is a peer of an
  out-of-place one);
- it reads the campaign's inputs (the campaign family's ``make_inputs``, so every kernel sees the same bytes): its own
  ``make_inputs`` must give the same names, dtypes and shapes, and its reference must agree with the campaign's on
  them (checked on the CPU when the peers are timed, at the smallest geometry: torch is not imported here);
- its own ``kernel_args``, ``launch``, ``arg_types``, knobs, build options.

Parsed by the config loader (evo/config.py) with :func:`parse_peer_kernels`, whose every refusal is one line; the
start-time checks (:func:`inputs_problem`) and the verdict on a peer's outputs (:func:`outputs_problem`) are
asked by evo/loop/peers.py before anything of a peer is timed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.core.family import Family, FamilyError, Geometry
from evo.core.genome import Genome

# labels a peer may not take: the interleaved measurement's own parts and the torch.compile peer
RESERVED = ("champion", "torch.compile", "torch_compile")
ENTRY_KEYS = ("family", "name", "genome")


class PeerError(Exception):
    """A peer that cannot be held against the campaign: one line (the config loader makes it a ConfigError)."""


@dataclass(frozen=True)
class PeerKernel:
    """One peer kernel of a campaign: its label in the log, its family, the genome timed, and where it came from."""

    name: str
    family: Family
    genome: Genome
    source: str  # as the config wrote it (a family name, folder or config path)

    def describe(self) -> str:
        knobs = ", ".join(f"{k}={v}" for k, v in self.genome.items())
        return f"{self.family.name} ({self.source}{'; ' + knobs if knobs else ''})"


def parse_peer_kernels(
    raw: Any,
    cfg_dir: Path,
    family: Family,
    geometries: Sequence[Geometry],
    load: Callable[[str, Path], Family],
) -> tuple[PeerKernel, ...]:
    """``peer.kernels`` of a config: a list whose entries are a family reference (string) or a mapping
    {family, name, genome}. ``load(ref, base)``: the config's family loader (a name, a folder, relative to ``base``).
    Raises PeerError naming the entry."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PeerError(f"peer.kernels: expected a list of families (folders, names or configs), got {raw!r}")
    out: list[PeerKernel] = []
    for i, entry in enumerate(raw):
        p = _parse_entry(entry, f"peer.kernels[{i}]", cfg_dir, family, geometries, load)
        if any(q.name == p.name for q in out):
            raise PeerError(f"peer.kernels[{i}]: the name {p.name!r} is taken by another peer (give name:)")
        out.append(p)
    return tuple(out)


def _parse_entry(
    entry: Any,
    where: str,
    cfg_dir: Path,
    family: Family,
    geometries: Sequence[Geometry],
    load: Callable[[str, Path], Family],
) -> PeerKernel:
    if isinstance(entry, str):
        entry = {"family": entry}
    if not isinstance(entry, dict):
        raise PeerError(f"{where}: expected a family (folder, name or config) or a mapping {{family, name, genome}}")
    unknown = [k for k in entry if k not in ENTRY_KEYS]
    if unknown:
        raise PeerError(f"{where}: {unknown[0]!r} is not a key of a peer (allowed: {', '.join(ENTRY_KEYS)})")
    ref = entry.get("family")
    if not isinstance(ref, str) or not ref:
        raise PeerError(f"{where}.family: missing (a family's folder, name, or a campaign config naming one)")
    peer_family, start = _family_of(ref, cfg_dir, load, where)
    values = entry.get("genome", start)
    if values is not None and not isinstance(values, dict):
        raise PeerError(f"{where}.genome: expected a mapping of knob values, got {values!r}")
    try:
        genome = peer_family.genome(values or {})
    except ValueError as e:
        raise PeerError(f"{where}.genome: {e}") from None
    name = entry.get("name", peer_family.name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.+-]{1,64}", name) or name in RESERVED:
        raise PeerError(f"{where}.name: {name!r} cannot label a peer (letters, digits, _ . + -; not {RESERVED[0]})")
    problem = problem_mismatch(family, peer_family, geometries) or _call(peer_family, "check", genome, geometries)
    if problem:
        raise PeerError(f"{where} ({peer_family.name}): {problem}")
    return PeerKernel(name, peer_family, genome, ref)


def _family_of(
    ref: str, cfg_dir: Path, load: Callable[[str, Path], Family], where: str
) -> tuple[Family, dict[str, Any] | None]:
    """The family ``ref`` names, and the knob values of a config's ``start:`` where ``ref`` is a campaign config."""
    p = Path(ref).expanduser()
    p = p if p.is_absolute() else cfg_dir / p
    start = None
    if p.suffix in (".yaml", ".yml") and p.is_file():
        import yaml

        try:
            doc = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise PeerError(f"{where}.family: {ref} cannot be read as a campaign config ({type(e).__name__})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("family"), str):
            raise PeerError(f"{where}.family: {ref} is not a campaign config (it names no family:)")
        start = doc.get("start") if isinstance(doc.get("start"), dict) else None
        ref, cfg_dir = doc["family"], p.resolve().parent
    try:
        return load(ref, cfg_dir), start
    except FamilyError as e:
        raise PeerError(f"{where}.family: {e}") from None


def _call(family: Family, method: str, *args: Any) -> Any:
    """A hook of the peer's family; whatever it raises, one line."""
    try:
        return getattr(family, method)(*args)
    except Exception as e:  # noqa: BLE001 - the user's family code: one line, not a traceback
        return f"{method}() raised {type(e).__name__}: {' '.join(str(e).split())[:160]}"


def problem_mismatch(family: Family, peer: Family, geometries: Sequence[Geometry]) -> str | None:
    """Why ``peer`` does not solve ``family``'s problem at these geometries (geometry parameters, each geometry
    taken, the outputs' names, dtypes and shapes), or None. Asked when the config is loaded; needs no torch."""
    # a parameter with a default that every geometry leaves at it need not exist in the peer (an option of the
    # campaign's family, e.g. fused_add_rmsnorm's rounds, that the peer's kernel does not offer)
    unset = {
        gp.name
        for gp in family.geometry_params
        if gp.default is not None and all(g.params.get(gp.name, gp.default) == gp.default for g in geometries)
    }
    mine = [gp.name for gp in family.geometry_params if gp.name not in unset]
    theirs = [gp.name for gp in peer.geometry_params if gp.name not in unset or gp.default is None]
    if sorted(mine) != sorted(theirs):
        return (
            f"another problem: its geometry parameters are {', '.join(theirs) or 'none'}, the campaign's "
            f"{', '.join(mine) or 'none'} (a peer must solve the campaign's problem; docs/measurement.md, Peers)"
        )
    for g in geometries:
        why = _call(peer, "check_geometry", dict(g.params))
        if why:
            return f"cannot take geometry {g.name}: {why}"
        want = _outputs(family, g)
        got = _outputs(peer, g)
        if isinstance(got, str):
            return got
        if got != want:
            return (
                f"another problem: its outputs at {g.name} are {_fmt(got)}, the campaign's {_fmt(want)} "
                "(names, dtypes, shapes must match; docs/measurement.md, Peers)"
            )
    return None


def _outputs(family: Family, g: Geometry) -> Any:
    try:
        return sorted((o.name, o.dtype, tuple(o.shape)) for o in family.outputs(g))
    except Exception as e:  # noqa: BLE001
        return f"outputs() raised {type(e).__name__} at {g.name}: {' '.join(str(e).split())[:160]}"


def _fmt(outs: Any) -> str:
    if isinstance(outs, str):
        return outs
    return ", ".join(f"{n} {dt}{list(shape)}" for n, dt, shape in outs)


def smallest(family: Family, geometries: Sequence[Geometry]) -> Geometry:
    """The geometry that moves the fewest bytes: where the start-time checks run on the CPU."""

    def size(g: Geometry) -> int:
        n = _call(family, "bytes_moved", g)
        return n if isinstance(n, int) else 0

    return min(geometries, key=size)


def inputs_problem(family: Family, peer: PeerKernel, g: Geometry) -> str | None:
    """Why ``peer`` cannot run on the campaign's inputs at ``g``, or None: its own ``make_inputs`` must give the same
    names, dtypes and shapes, each ``init_from`` must name one of them, and its float64 reference on the campaign's
    inputs must agree with the campaign's (the same problem, not a look-alike). Runs on the CPU, when the peers are
    about to be timed (evo/loop/peers.py)."""
    import torch

    try:
        ours = family.make_inputs(g, 0, torch.device("cpu"))
        theirs = peer.family.make_inputs(g, 0, torch.device("cpu"))
    except Exception as e:  # noqa: BLE001
        return f"make_inputs() raised {type(e).__name__} at {g.name}: {' '.join(str(e).split())[:160]}"
    sig = {k: (str(v.dtype), tuple(v.shape)) for k, v in ours.items()}
    peer_sig = {k: (str(v.dtype), tuple(v.shape)) for k, v in theirs.items()}
    if sig != peer_sig:
        return f"not the campaign's problem: its inputs at {g.name} are {_sig(peer_sig)}, the campaign's {_sig(sig)}"
    for o in peer.family.outputs(g):
        if o.init_from is not None and o.init_from not in sig:
            return f"its output {o.name} starts from input {o.init_from!r}, which the campaign's inputs lack"
    return _reference_problem(family, peer.family, ours, g)


def _sig(sig: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {dt.removeprefix('torch.')}{list(shape)}" for k, (dt, shape) in sorted(sig.items()))


def _reference_problem(family: Family, peer: Family, inputs: Mapping[str, Any], g: Geometry) -> str | None:
    """The two families' float64 references on the same inputs: the same problem gives the same values."""
    import torch

    try:
        want, got = family.reference(inputs, g), peer.reference(inputs, g)
    except Exception as e:  # noqa: BLE001
        return f"reference() raised {type(e).__name__} at {g.name}: {' '.join(str(e).split())[:160]}"
    for name, w in want.items():
        x = got.get(name)
        if x is None or tuple(x.shape) != tuple(w.shape):
            return f"not the campaign's problem: its reference gives no {name} of the campaign's shape at {g.name}"
        w64, x64 = w.to(torch.float64), x.to(torch.float64)
        scale = float(w64.abs().max()) or 1.0
        diff = float((w64 - x64).abs().max())
        if not diff <= 1e-6 * scale:
            return (
                f"not the campaign's problem: its reference's {name} differs from the campaign's by {diff:.3g} "
                f"(max abs) on the same inputs at {g.name}"
            )
    return None


def outputs_problem(evidence: Any, error_bound: Callable[[str], float]) -> str | None:
    """Why a peer's outputs fail the campaign's reference (the campaign family's float64 reference and error bounds,
    the bounds its baseline is held to), or None: every output finite, fully written, within bound, the same bits
    on every run; no input written, nothing written past an output's ends."""
    for w in evidence.written_inputs:
        return f"writes its input {w.input} at {w.geometry} seed {w.seed} ({w.changed} of {w.numel} elements)"
    for c in evidence.checks:
        bound = error_bound(c.output)
        if c.oob_bytes:
            return f"writes {c.oob_bytes} bytes past {c.output} at {c.geometry} seed {c.seed}"
        if c.nonfinite or c.unwritten:
            return f"{c.output} at {c.geometry} seed {c.seed}: {c.nonfinite} NaN/Inf, {c.unwritten} unwritten"
        if c.rel_err is None or not c.rel_err <= bound:
            return (
                f"{c.output} at {c.geometry} seed {c.seed} has relative error {_g(c.rel_err)} against the float64 "
                f"reference (bound {bound})"
            )
        if len(set(c.hashes)) > 1:
            return f"{c.output} at {c.geometry} seed {c.seed}: the bits differ from run to run (a race)"
    return None


def _g(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def check_peers(cfg: Any, g: Geometry, arch: str, say: Callable[[str], None]) -> str | None:
    """`evo check`'s part for ``peer.kernels``: each peer held to the campaign's problem at ``g`` on the CPU and its
    genome compiled with its own family's options (no GPU needed); the first problem as one line, or None."""
    from harness.build import Builder
    from harness.errors import HarnessError

    for k in getattr(cfg.peer, "kernels", ()):
        why = inputs_problem(cfg.family, k, g)
        if why:
            return f"peer {k.name} ({k.family.name}): {why}"
        try:
            Builder(k.family, list(cfg.geometries), arch, defines=cfg.build_defines).build(k.genome)
        except (HarnessError, ValueError) as e:
            return f"peer {k.name} ({k.family.name}): does not build: {' '.join(str(e).split())[:240]}"
        say(f"  peer {k.name}: {k.describe()}: the campaign's inputs and reference at {g.name}, compiled")
    return None
