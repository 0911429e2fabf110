"""The champion beside the peer kernels (``peer.kernels``): interleaved, at every geometry, on the same inputs.

Called as a run ends (``Campaign._run``, after the ceiling check), and by nothing else. Each peer (a family of the
campaign's problem, evo/measure/peer_kernels.py) is first held to the problem on the CPU (its inputs and reference
against the campaign's), then built with its own family's options, loaded, and run through the correctness check on
the campaign's inputs against the campaign's float64 reference and error bounds. A peer that fails either is
recorded with its reason and never timed. The ones that pass are timed with the champion in one interleaved
measurement per geometry (the perf gate's rounds, rotating order, graphs of about ``batch_ms`` of each part's own
launches, throttled rounds dropped): a peer's ratio is the median of the per-round ratios peer / champion, with
its 95% order-statistic interval, so above 1 the champion is the faster. torch.compile of the reference
(``peer.torch_compile`` not off) is one more part of that measurement, compiled at every geometry first.

The record is appended to the ledger meta ``peer_kernels``; the attempt log's Peer section reads the latest
(evo/report/peer_log.py). A failure of the peers' own loses nothing of the campaign: it is recorded as the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evo.core.protocols import PeerKernelBackend
from evo.core.records import Attempt
from evo.loop.attempt import now
from evo.loop.modules import LoadedModules
from evo.measure.peer_kernels import PeerKernel, inputs_problem, outputs_problem, smallest
from gates.stats import median, median_interval
from harness.errors import HarnessError
from harness.torch_peer import TORCH_COMPILE

META_KEY = "peer_kernels"


def time_peers(
    cfg: Any,
    ledger: Any,
    modules: LoadedModules,
    champ: Attempt | None,
    out: Callable[[str], None],
    rounds: int | None = None,
) -> dict[str, Any] | None:
    """Time the peers beside ``champ``; append the record to the ledger meta and print one line a peer. None where
    the config names no peer kernel."""
    kernels: tuple[PeerKernel, ...] = tuple(getattr(cfg.peer, "kernels", ()))
    if not kernels or champ is None:
        return None
    p, backend = cfg.gates.perf, modules.backend
    rounds = rounds or p.rounds
    record: dict[str, Any] = {
        "champion": champ.id,
        "genome_key": champ.genome_key,
        "at": now(),
        "backend": backend.name,
        "simulated": modules.simulated,
        "rounds": rounds,
        "method": (
            f"the champion and every peer that passes the correctness check interleaved, up to {rounds} rounds in "
            f"rotating order per geometry, graphs of about {p.batch_ms:g} ms of each part's own launches on the "
            "campaign's inputs (one set of output buffers), throttled rounds dropped; ratio: median of the per-round "
            "ratios peer / champion with its 95% order-statistic interval (above 1: the champion is faster)"
        ),
        "peers": {k.name: {"family": k.family.name, "source": k.source, "genome": dict(k.genome)} for k in kernels},
        "geometries": {},
    }
    if not getattr(backend, "peer_kernels", False):
        record["not_timed"] = (
            f"the {backend.name} backend runs no peer kernel (its measurements are of the campaign's family alone): "
            "peers are timed on a GPU"
        )
    else:
        try:
            _measure(cfg, ledger, modules, champ, kernels, rounds, record)
        except Exception as e:  # a fault here must not cost the campaign its ledger
            record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        except KeyboardInterrupt:
            record["error"] = "interrupted by the user"
    ledger.append_meta(META_KEY, record)
    for line in describe(record):
        out(line)
    return record


def _load_peer(cfg: Any, modules: LoadedModules, k: PeerKernel) -> tuple[Any, str | None]:
    """The peer built with its own family's options and loaded, and why it fails the campaign's reference (None: it
    passes). Raises where it cannot be built, loaded or run (a HarnessError, or whatever its family's hooks raise)."""
    from harness.build import Builder

    builder = Builder(k.family, list(cfg.geometries), modules.builder.arch, defines=cfg.build_defines)
    backend: PeerKernelBackend = modules.backend  # type: ignore[assignment]  # (asked peer_kernels first)
    loaded = backend.load(builder.build(k.genome), k.genome, peer=k.name)
    ev = modules.backend.correctness(loaded)
    return loaded, outputs_problem(ev, cfg.family.error_bound)


def _admit(cfg: Any, modules: LoadedModules, kernels: tuple[PeerKernel, ...], record: dict[str, Any]) -> list:
    """The peers that may be timed: (name, loaded) of each that solves the campaign's problem and passes its
    correctness check; the others get their reason in the record."""
    g0 = smallest(cfg.family, cfg.geometries)
    parts = []
    for k in kernels:
        entry = record["peers"][k.name]
        why = inputs_problem(cfg.family, k, g0)
        if why:
            entry["error"] = why
            continue
        try:
            loaded, wrong = _load_peer(cfg, modules, k)
        except Exception as e:  # noqa: BLE001 - the peer's own build, load or hooks: its row, never the others'
            entry["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            if isinstance(e, HarnessError) and e.fatal:  # the CUDA context is gone: nothing more can be timed here
                raise
            continue
        entry["correct"] = wrong is None
        if wrong:
            entry["error"] = f"fails correctness: {wrong}"
            continue
        parts.append((k.name, loaded))
    return parts


def _torch_part(cfg: Any, modules: LoadedModules, record: dict[str, Any]) -> list[tuple[str, Any]]:
    """torch.compile of the reference as one more part (``peer.torch_compile`` not off), compiled at every geometry
    first (harness/torch_peer.py): [(name, part)], or [] with its error in the record. Its outputs are the reference's
    own, so it has no correctness check."""
    mode = cfg.peer.torch_compile
    if mode == "off":
        return []
    entry = record["peers"][TORCH_COMPILE] = {
        "family": "torch.compile of the float32 reference",
        "source": "peer.torch_compile",
        "genome": {"mode": mode},
        "reference": True,
    }
    backend: Any = modules.backend
    try:
        part = backend.load(None, {"mode": mode}, peer=TORCH_COMPILE)
        got = backend.prepare_torch_peer(part, list(cfg.geometries))
    except Exception as e:  # noqa: BLE001 - torch.compile's failure is its row's, never the kernel peers'
        entry["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        return []
    failed = [(g, r["error"]) for g, r in got.items() if "error" in r]
    if failed:
        entry["error"] = f"torch.compile failed at {failed[0][0]}: {failed[0][1]}"
        return []
    entry["compile_s"] = {g: r.get("compile_s") for g, r in got.items()}
    return [(TORCH_COMPILE, part)]


def _measure(
    cfg: Any,
    ledger: Any,
    modules: LoadedModules,
    champ: Attempt,
    kernels: tuple[PeerKernel, ...],
    rounds: int,
    record: dict[str, Any],
) -> None:
    """The interleaved measurement of the champion and the admitted peers at every geometry, weighted ones first."""
    peers = _admit(cfg, modules, kernels, record) + _torch_part(cfg, modules, record)
    if not peers:
        return
    backend = modules.backend
    parts = [("champion", modules.load_genome(champ.genome)), *peers]
    genomes = {k.name: k.genome.key for k in kernels} | {TORCH_COMPILE: cfg.peer.torch_compile}
    keys = [champ.genome_key, *(f"peer:{name}:{genomes[name]}" for name, _ in peers)]  # (graph sizes, by part)
    tbps = (ledger.meta("copy_ceiling") or {}).get("ceiling_tbps")
    for g in sorted(cfg.geometries, key=lambda g: g.weight <= 0):
        s = backend.measure(parts, g, rounds, modules.part_launches(parts, keys, g))
        c = s.times_us["champion"]
        row: dict[str, Any] = {
            "weight": g.weight,
            "champion_us": median(c),
            "rounds": len(c),
            "discarded": s.discarded,
            "launches": s.launches,
            "peers": {},
        }
        nbytes = cfg.family.bytes_moved(g)
        if tbps and nbytes:
            row["champion_pct_ceiling"] = _pct(nbytes, row["champion_us"], tbps)
        for name, _ in peers:
            t = s.times_us[name]
            iv = median_interval([x / y for x, y in zip(t, c)])
            us = median(t)
            peer: dict[str, Any] = {"us": us, "ratio": {"value": iv.value, "lo": iv.lo, "hi": iv.hi, "n": iv.n}}
            if tbps and nbytes:
                peer["pct_ceiling"] = _pct(nbytes, us, tbps)
            row["peers"][name] = peer
        record["geometries"][g.name] = row


def _pct(nbytes: int, us: float, tbps: float) -> float:
    """The time as a percentage of the copy ceiling for the problem's bytes (the same for every kernel of it)."""
    return 100.0 * nbytes / (us * 1e-6) / (tbps * 1e12)


def describe(record: dict[str, Any]) -> list[str]:
    """One line a peer: its ratio at each geometry, or why it was not timed."""
    head = f"peers of champion #{record['champion']}"
    if record.get("not_timed"):
        return [f"{head}: not timed: {record['not_timed']}"]
    if record.get("error"):
        return [f"{head}: timing failed: {record['error']}"]
    lines = []
    for name, entry in record["peers"].items():
        if entry.get("error"):
            lines.append(f"{head}: {name}: not timed: {entry['error']}")
            continue
        per = []
        for g, row in record["geometries"].items():
            r = (row["peers"].get(name) or {}).get("ratio")
            if r:
                per.append(f"{g} {r['value']:.3f}x [{r['lo']:.3f}, {r['hi']:.3f}]")
        lines.append(f"{head}: {name} / champion: {'; '.join(per) or 'no geometry timed'}")
    return lines
