"""An nvbench result of the baseline kernel as a peer figure (``peer: {nvbench: FILE}``; issue #43 item 4).

An engine often benchmarks the kernel evo starts from with nvbench. The ``--json`` file such a benchmark writes
(nvbench's JSON printer: ``benchmarks[].states[]``, each state with its ``axis_values`` and tagged ``summaries``
whose ``data`` holds the ``value``) is read here: each geometry of the campaign gets the time of the one state whose
axes agree with it, and the log's Peer section shows that time beside the baseline's and the champion's.

A state agrees with a geometry where every state axis named as one of the geometry's params holds its value
(numbers compared as numbers) and at least one is so named, or where an axis ``geometry`` holds the geometry's name
(what ``evo table --as nvbench`` writes). Skipped states never agree. A geometry no state agrees with, or several do
(an axis the geometry does not fix, e.g. two dtypes), gets no figure, and the log says why; a file in which no
geometry gets one is refused. The time is nvbench's cold GPU median where the file has it, else its mean (said so:
evo's own figures are medians).

Called by the config loader (a file that cannot serve is a one-line config error) and, once per campaign, by the
set-up (evo/loop/baseline.py), which keeps what it read in the ledger meta (``NVBENCH_META``); read by the log
(evo/report/logmd.py ``_peer``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evo.core.family import Geometry
from evo.core.protocols import Storage

NVBENCH_META = "peer_nvbench"
TIMES = (("nv/cold/time/gpu/median", "median"), ("nv/cold/time/gpu/mean", "mean"))  # preferred first
NOISE = "nv/cold/time/gpu/stdev/relative"
DASH = "–"  # as the rest of the log (evo/report/logmd.py)

JsonMap = Mapping[str, object]  # a JSON object as read: every value is checked where it is used


class NvbenchError(ValueError):
    """The file cannot serve as a peer figure (one line, naming the file)."""


@dataclass
class Figure:
    """One geometry's peer figure: the time of the state that agrees with it, or why there is none."""

    us: float | None = None
    statistic: str = ""  # "median" or "mean" (nvbench's cold GPU time)
    state: str = ""  # the state's name, as nvbench prints it
    device: str = ""
    noise_pct: float | None = None  # nvbench's relative standard deviation
    error: str = ""


@dataclass
class NvbenchPeer:
    """What the set-up keeps of the file (in the meta as ``to_meta()``, read back by ``from_meta``)."""

    file: str
    benchmark: str
    figures: dict[str, Figure] = field(default_factory=dict)

    def to_meta(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_meta(cls, meta: JsonMap) -> NvbenchPeer | None:
        got = meta.get(NVBENCH_META)
        if not isinstance(got, Mapping):
            return None
        names = {f.name for f in dataclasses.fields(Figure)}
        figs = got.get("figures")
        figures = {
            str(g): Figure(**{k: v for k, v in f.items() if k in names})
            for g, f in (figs.items() if isinstance(figs, Mapping) else [])
            if isinstance(f, Mapping)
        }
        return cls(str(got.get("file", "")), str(got.get("benchmark", "")), figures)


def _maps(v: object) -> list[JsonMap]:
    """The objects of a JSON list (anything else, or no list, left out)."""
    return [x for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []


def read_nvbench(
    path: str | Path, geometries: Sequence[Geometry], benchmark: str | None = None, names: Sequence[str] = ()
) -> NvbenchPeer:
    """The peer figures of ``path`` at ``geometries``. ``benchmark``: which of the file's benchmarks (needed where it
    holds several and none is named as one of ``names``, the family's entry and name)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        why = f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
        raise NvbenchError(f"{p}: cannot be read as JSON ({why})") from None
    benches = _maps(doc.get("benchmarks")) if isinstance(doc, dict) else []
    if not benches:
        raise NvbenchError(f"{p}: not an nvbench JSON result (no benchmarks list; write one with --json FILE)")
    bench = _pick(p, benches, benchmark, names)
    devices = {str(d.get("id")): str(d.get("name", "")) for d in _maps(doc.get("devices"))}
    states = [s for s in _maps(bench.get("states")) if not s.get("is_skipped")]
    figures = {g.name: _figure(states, g, devices) for g in geometries}
    if all(f.us is None for f in figures.values()):
        axes = sorted({str(a.get("name")) for s in states for a in _maps(s.get("axis_values"))})
        raise NvbenchError(
            f"{p}: no state of benchmark {bench.get('name')!r} matches a geometry of the campaign (its axes: "
            f"{', '.join(axes) or 'none'}; a geometry's params must be named as axes)"
        )
    return NvbenchPeer(str(p), str(bench.get("name")), figures)


def _pick(p: Path, benches: list[JsonMap], benchmark: str | None, names: Sequence[str]) -> JsonMap:
    by_name = {str(b.get("name")): b for b in benches}
    if benchmark is not None:
        if benchmark not in by_name:
            raise NvbenchError(f"{p}: no benchmark {benchmark!r} (it holds: {', '.join(by_name)})")
        return by_name[benchmark]
    if len(benches) == 1:
        return benches[0]
    named = [by_name[n] for n in names if n in by_name]
    if named:
        return named[0]
    listed = ", ".join(by_name)
    raise NvbenchError(f"{p}: holds {len(benches)} benchmarks ({listed}): name one (peer.nvbench_benchmark)")


def _same(a: object, b: object) -> bool:
    """An axis value (nvbench writes numbers as strings) against a geometry param."""
    try:
        return float(str(a)) == float(str(b))
    except ValueError:
        return str(a) == str(b)


def _agrees(state: JsonMap, g: Geometry) -> bool:
    axes = {str(a.get("name")): a.get("value") for a in _maps(state.get("axis_values"))}
    if "geometry" in axes:
        return str(axes["geometry"]) == g.name
    named = [n for n in axes if n in g.params]
    return bool(named) and all(_same(axes[n], g.params[n]) for n in named)


def _value(summary: JsonMap | None) -> float | None:
    for d in _maps(summary.get("data") if summary is not None else None):
        if d.get("name") == "value":
            try:
                return float(str(d.get("value")))
            except ValueError:
                return None
    return None


def _figure(states: Sequence[JsonMap], g: Geometry, devices: Mapping[str, str]) -> Figure:
    hits = [s for s in states if _agrees(s, g)]
    if len(hits) != 1:
        return Figure(
            error="no state matches it" if not hits else f"{len(hits)} states match it (an axis it does not fix)"
        )
    st = hits[0]
    summaries = {str(s.get("tag")): s for s in _maps(st.get("summaries"))}
    for tag, statistic in TIMES:
        secs = _value(summaries.get(tag))
        if secs is not None and secs > 0:
            noise = _value(summaries.get(NOISE))
            return Figure(
                us=secs * 1e6,
                statistic=statistic,
                state=str(st.get("name") or st.get("description") or ""),
                device=devices.get(str(st.get("device")), ""),
                noise_pct=None if noise is None else noise * 100.0,
            )
    return Figure(error=f"state {st.get('name')!r} has no cold GPU time ({' or '.join(t for t, _ in TIMES)})")


def config_keys(
    section: JsonMap, cfg_dir: Path, geometries: Sequence[Geometry], names: Sequence[str]
) -> tuple[Path | None, str | None]:
    """``peer.nvbench`` (resolved against the config's folder) and ``peer.nvbench_benchmark`` of a config's
    ``peer`` section, the file read once to check it can serve (NvbenchError otherwise, naming the key)."""
    raw, bench = section.get("nvbench"), section.get("nvbench_benchmark")
    if bench is not None and not isinstance(bench, str):
        raise NvbenchError(f"peer.nvbench_benchmark: {bench!r} is not a string")
    if raw is None:
        if bench is not None:
            raise NvbenchError("peer.nvbench_benchmark: given without peer.nvbench (the file)")
        return None, None
    if not isinstance(raw, str):
        raise NvbenchError(f"peer.nvbench: {raw!r} is not a path")
    path = Path(raw).expanduser()
    path = path if path.is_absolute() else (cfg_dir / path).resolve()
    try:
        read_nvbench(path, geometries, bench, names)
    except NvbenchError as e:
        raise NvbenchError(f"peer.nvbench: {e}") from None
    return path, bench


def keep(
    path: Path | None,
    benchmark: str | None,
    geometries: Sequence[Geometry],
    names: Sequence[str],
    ledger: Storage,
    out: Callable[[str], None],
) -> None:
    """Read ``peer.nvbench`` into the ledger meta, once per campaign (a resume keeps what the first set-up read)."""
    if path is None or ledger.meta(NVBENCH_META) is not None:
        return
    got = read_nvbench(path, geometries, benchmark, names)
    ledger.set_meta(NVBENCH_META, got.to_meta())
    timed = [g for g, f in got.figures.items() if f.us is not None]
    out(f"peer: nvbench benchmark {got.benchmark!r} of {path}: a time at {len(timed)} of {len(got.figures)} geometries")


# --- the log's Peer section ------------------------------------------------------------------------------------------
def header() -> list[str]:
    return ["nvbench µs", "Champion vs nvbench"]


def cells(peer: NvbenchPeer, geometry: str, best_us: float | None) -> list[str]:
    """The geometry's nvbench time and the champion's speedup over it (the Peer table's two columns)."""
    f = peer.figures.get(geometry) or Figure(error="not in the file's figures")
    if f.us is None:
        return [f"{DASH} ({f.error})" if f.error else DASH, DASH]
    stat = "" if f.statistic == "median" else f" ({f.statistic})"
    return [f"{f.us:.2f}{stat}", f"{f.us / best_us:.3f}x" if best_us else DASH]


def note(peer: NvbenchPeer) -> list[str]:
    """The line under the Peer table naming the file, its benchmark and the device it was timed on."""
    devs = sorted({f.device for f in peer.figures.values() if f.device})
    on = f", timed on {', '.join(devs)}" if devs else ""
    return [
        f"nvbench: benchmark `{peer.benchmark}` of {peer.file}{on}; its cold GPU median (else the mean, marked) per "
        "matching state, read once at set-up.",
        "",
    ]
