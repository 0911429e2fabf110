"""The recorded backend: serve real H200 measurements where no GPU is present.

A sweep (``tools/sweep.py`` on the GPU) stores, for every genome of a family's
knob space, its correctness evidence (output hashes per geometry, seed and
run) and its per-round batch times interleaved with the baseline's. This
backend replays them through the same gates, so a campaign on a laptop or in
CI exercises the whole loop against real numbers. Every output of such a run
says "simulated from recorded H200 measurements".

Pairing: round i of a genome was measured right next to a baseline sample
b_i, so times are normalized as t_i * (B / b_i) with B the baseline's median;
the ratio of two genomes in round i is then free of slow drift across the
sweep.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.core.family import Family, Geometry
from evo.core.genome import Genome
from evo.core.records import SIMULATED_LABEL
from evo.core.variant import LaunchError, launch_digest
from gates.correctness import CorrectnessEvidence, OutputCheck
from harness.build import Built
from harness.errors import HarnessError
from harness.gpu import Loaded, Samples
from harness.inout import InputWrite
from harness.sweepfile import linked_entry, sweep_files
from harness.sweepfile import load as load_sweep

SAME = "="  # a stored hash equal to the baseline's


class NotRecorded(HarnessError):
    """The sweep holds nothing for this genome or geometry."""

    kind, gate = "not_recorded", "correctness"


@dataclass
class Sweep:
    path: Path
    data: dict[str, Any]
    geo_map: dict[str, str]  # config geometry name -> recorded geometry name


def _params_key(params: Mapping[str, object], defaults: Mapping[str, object] | None = None) -> str:
    """A geometry's parameters as a key; one at its family's default counts as absent: a sweep recorded before
    the family had that parameter measured what its default does (fused_add_rmsnorm's ``rounds``)."""
    d = defaults or {}
    return json.dumps({k: params[k] for k in sorted(params) if not (k in d and d[k] == params[k])}, sort_keys=True)


def _defaults(family: Family) -> dict[str, object]:
    return {gp.name: gp.default for gp in family.geometry_params if gp.default is not None}


def load_sweeps(family: Family) -> list[dict[str, Any]]:
    out = []
    for p in sweep_files(family.folder / "recorded"):
        d = load_sweep(p)
        d["_path"] = str(p)
        out.append(d)
    return out


def recorded_geometries(family: Family) -> list[dict[str, Any]]:
    return [g for d in load_sweeps(family) for g in d["geometries"]]


def sweep_launch(d: Mapping[str, Any]) -> str:
    """How a sweep's timed launches were made (sweeps before 2026-12-02 say nothing: plain)."""
    return str(d.get("launch") or "plain")


def find_sweep(family: Family, geometries: Sequence[Geometry], launch: str = "plain") -> Sweep:
    """The sweep that covers every geometry of the campaign (matched by parameters, not names), timed with the
    campaign's launches (gates.perf.launch: plain, or pdl)."""
    sweeps = load_sweeps(family)
    if not sweeps:
        raise NotRecorded(f"family {family.name} has no recorded measurements under {family.folder / 'recorded'}")
    timed = [d for d in sweeps if sweep_launch(d) == launch]
    if not timed:
        kinds = ", ".join(sorted({sweep_launch(d) for d in sweeps}))
        raise NotRecorded(
            f"no recorded sweep of family {family.name} timed {launch} launches (gates.perf.launch; recorded: "
            f"{kinds}); run on a GPU, or record one with tools/sweep.py on a config that launches {launch}"
        )
    sweeps = timed
    dft = _defaults(family)
    for d in sweeps:
        by_params = {_params_key(g["params"], dft): g["name"] for g in d["geometries"]}
        mapping = {g.name: by_params.get(_params_key(g.params, dft)) for g in geometries}
        if all(mapping.values()):
            return Sweep(Path(d["_path"]), d, mapping)  # type: ignore[arg-type]

    def shape(name: str, params: Mapping[str, Any]) -> str:
        return f"{name} ({', '.join(f'{k}={params[k]}' for k in sorted(params))})"

    # matched by parameters, so a name alone says little: both sides are given with their parameters
    recorded = [rg for d in sweeps for rg in d["geometries"]]
    have = sorted({shape(g["name"], g["params"]) for g in recorded})
    missing = [
        shape(g.name, g.params)
        for g in geometries
        if not any(_params_key(g.params, dft) == _params_key(rg["params"], dft) for rg in recorded)
    ]
    raise NotRecorded(
        f"no recorded H200 sweep covers geometries {', '.join(missing) or '(this combination)'} "
        f"(recorded: {', '.join(have)}); run on a GPU or pick recorded geometries"
    )


def recorded_evidence(
    entry: Mapping[str, Any],
    baseline_hashes: Mapping[Any, str],
    seeds: int,
    runs: int,
    rename: Mapping[str, str] | None = None,
) -> CorrectnessEvidence:
    """A sweep entry's recorded checks as the evidence a GPU run gives the correctness gate: the first ``seeds``
    seeds and ``runs`` runs, at the geometries ``rename`` maps (recorded name -> the campaign's; None: all, as
    named), each stored "=" read as the baseline's hash there."""
    ev = CorrectnessEvidence()
    for g, seed, output, hashes, nonfinite, unwritten, rel, mabs, mismatch, *more in entry["checks"]:
        oob = more[0] if more else 0  # guard-band damage: recorded by sweeps from 2026-11-30 13:00 on
        cfg_g = g if rename is None else rename.get(g)
        if cfg_g is None or seed >= seeds:
            continue
        base = baseline_hashes.get(f"{cfg_g}/{seed}/{output}", "")
        hs = [base if h == SAME else h for h in hashes[:runs]]
        ev.checks.append(OutputCheck(cfg_g, seed, output, hs, nonfinite, unwritten, rel, mabs, mismatch, oob))
    for g, seed, name, changed, numel in entry.get("written_inputs", []):  # inputs a launch changed (sweeps since)
        cfg_g = g if rename is None else rename.get(g)
        if cfg_g is not None and seed < seeds:
            ev.written_inputs.append(InputWrite(cfg_g, seed, name, changed, numel))
    return ev


class RecordedBackend:
    name = "recorded"
    simulated = True
    label = SIMULATED_LABEL  # what every timing and line of its runs says (harness/ktcache.py: the cache's device)

    def __init__(
        self,
        family: Family,
        geometries: Sequence[Geometry],
        *,
        seeds: int = 3,
        runs: int = 2,
        sweep: Sweep | None = None,
        launch: str = "plain",
    ):
        """``sweep``: the one to replay (default: the family's recorded sweep that covers ``geometries``, timed with
        ``launch`` launches)."""
        self.family = family
        self.geometries = list(geometries)
        self.sweep = sweep if sweep is not None else find_sweep(family, geometries, launch)
        self.pdl = sweep_launch(self.sweep.data) == "pdl"
        d = self.sweep.data
        self.seeds = min(seeds, d["seeds"])
        self.runs = min(runs, d["runs"])
        self.baseline_key: str = d["baseline_key"]
        self.baseline_hashes = {self._cfg_key(k): v for k, v in d["baseline_hashes"].items() if self._cfg_key(k)}
        self.baseline_errors = {self._cfg_key(k): v for k, v in d["baseline_errors"].items() if self._cfg_key(k)}
        self._rev = {v: k for k, v in self.sweep.geo_map.items()}
        self._launches: dict[str, str] = {}  # genome key -> its launch digest (old sweeps' links, _link_holds)

    def _cfg_key(self, key: str) -> str | None:
        """Recorded "geometry/seed/output" -> the campaign's geometry name."""
        rg, rest = key.split("/", 1)
        for cfg_name, rec_name in self.sweep.geo_map.items():
            if rec_name == rg:
                return f"{cfg_name}/{rest}"
        return None

    def _entry(self, key: str) -> dict[str, Any]:
        """The sweep's entry of a genome, its ``same_as`` links followed (a link holds one variant's data for
        another genome of the same machine code and launch)."""
        e = linked_entry(self.sweep.data["genomes"], key, self._link_holds)
        if e is None:
            raise NotRecorded(
                f"genome {key} is not in the recorded sweep {self.sweep.path.name}"
                + (" (its same_as links lead to no data)" if key in self.sweep.data["genomes"] else "")
            )
        return e

    def _link_holds(self, key: str, link: Mapping[str, Any]) -> None:
        """A sweep from before launch digests linked by machine code alone (its links carry no ``launch``): such a
        link is followed where both genomes launch alike at the campaign's geometries (evo/core/variant.py), as
        every link of the shipped sweeps does; where their launches differ, this genome's launch was never
        measured, and its twin's times are not served in its place. A sweep that records launches links by
        (code, launch) already."""
        if "launch" in link:
            return
        try:
            mine, theirs = self._launch_of(key), self._launch_of(link["same_as"])
        except LaunchError as e:
            raise NotRecorded(str(e)) from None
        if mine != theirs:
            raise NotRecorded(
                f"genome {key} is linked by its machine code alone to {link['same_as']} in the recorded sweep "
                f"{self.sweep.path.name} (a sweep from before launch digests), and its launch differs: never measured"
            )

    def _launch_of(self, key: str) -> str:
        if key not in self._launches:
            self._launches[key] = launch_digest(self.family, Genome.from_key(key), self.geometries, self.pdl)
        return self._launches[key]

    # --- the backend interface ----------------------------------------------
    def facts(self) -> dict[str, Any]:
        f = dict(self.sweep.data.get("device", {}))
        f["recorded"] = f"{self.sweep.path.name} ({self.sweep.data.get('created', '?')})"
        f["note"] = self.label
        return f

    def knob_space(self) -> dict[str, list[Any]] | None:
        """The knob values the sweep covers (knob -> values; a sweep of a sub-space, tools/sweep.py ``--knobs``,
        covers fewer than the family has), or None where the sweep does not say (sweeps before 2026-11-30)."""
        space = self.sweep.data.get("space") or {}
        knobs = space.get("knobs")
        return dict(knobs) if isinstance(knobs, dict) else None

    def recorded_floor(self) -> dict[str, Any] | None:
        """The latency floor the sweep measured (evo/measure/ceiling.py's record, at the campaign's geometry
        names), or None where the sweep has none."""
        rec = self.sweep.data.get("latency_floor")
        if not isinstance(rec, dict) or not isinstance(rec.get("geometries"), dict):
            return None
        per = {c: rec["geometries"][r] for c, r in self.sweep.geo_map.items() if r in rec["geometries"]}
        return {**rec, "backend": self.name, "geometries": per, "note": self.label}

    def copy_ceiling(self, **kwargs: Any) -> dict[str, float]:
        return dict(self.sweep.data["copy_ceiling"])  # (one recorded figure, however many trials are asked for)

    def load(self, built: Built | None, genome: Mapping[str, Any]) -> Loaded:
        return Loaded(built, genome, {"key": Genome(genome).key})  # type: ignore[arg-type]

    def correctness(self, loaded: Loaded, *, freeze: bool = False) -> CorrectnessEvidence:
        e = self._entry(loaded.functions["key"])
        if e.get("status", "ok") != "ok":
            raise NotRecorded(f"recorded run of this genome ended with {e.get('status')}: {e.get('reason', '')}")
        return recorded_evidence(e, self.baseline_hashes, self.seeds, self.runs, self._rev)

    def recheck(self, loaded: Loaded) -> str | None:
        e = self._entry(loaded.functions["key"])
        return e.get("recheck")

    def launches_for(self, loaded: Loaded, g: Geometry) -> int:
        return int(self.sweep.data["launches"][self.sweep.geo_map[g.name]])

    def measure(
        self,
        parts: Sequence[tuple[str, Loaded]],
        g: Geometry,
        rounds: int,
        launches: int | Mapping[str, int] | None = None,
        stop: Any = None,
    ) -> Samples:
        # (the counts the sweep timed with, whatever ``launches`` asks: that is what the samples say)
        rg = self.sweep.geo_map[g.name]
        keys = [p[1].functions["key"] for p in parts]
        if len(set(keys)) == 1 and keys[0] == self.baseline_key and len(parts) == 2:
            aa = self.sweep.data["aa"][rg]  # an A/A pair was recorded as such
            n = min(rounds, len(aa["a"]), len(aa["b"]))
            return Samples(
                {parts[0][0]: aa["a"][:n], parts[1][0]: aa["b"][:n]},
                0,
                self.launches_for(parts[0][1], g),
                {"note": self.label},
            )
        base_med = sorted(self._entry(self.baseline_key)["t"][rg])
        bmed = base_med[len(base_med) // 2]
        times: dict[str, list[float]] = {}
        disc = 0
        clocks: dict[str, Any] = {"note": self.label}
        for (label, _), key in zip(parts, keys):
            e = self._entry(key)
            if rg not in e.get("t", {}):
                raise NotRecorded(f"genome {key} has no recorded times at {g.name}")
            t, b = e["t"][rg], e["b"][rg]
            times[label] = [ti * bmed / bi for ti, bi in zip(t, b)][:rounds]
            disc = max(disc, e.get("disc", {}).get(rg, 0))
            clocks.update(e.get("clk", {}).get(rg, {}))
        n = min(len(v) for v in times.values())
        early = stop is not None and stop.after < n and stop.hit({k: v[: stop.after] for k, v in times.items()})
        if early:
            n = stop.after
        # sweeps from session 18 on keep each genome's own graph length ("n"); older ones timed all by the baseline's
        counts = {
            label: self._entry(key).get("n", {}).get(rg, self.launches_for(loaded, g))
            for (label, loaded), key in zip(parts, keys)
        }
        return Samples({k: v[:n] for k, v in times.items()}, disc, counts, clocks, early)

    def peer_torch_compile(self, mode: str, geometries: Sequence[Geometry]) -> dict[str, Any]:
        rec = self.sweep.data.get("peer_torch_compile", {})
        return {g.name: rec[self.sweep.geo_map[g.name]] for g in geometries if self.sweep.geo_map[g.name] in rec}
