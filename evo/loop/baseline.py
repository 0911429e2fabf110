"""The campaign's references, measured at set-up before anything is proposed (``Campaign.setup``).

In order: the device's facts, the copy ceiling and the latency floor (context for every figure), the baseline
(built, loaded, checked against float64, its output hashes frozen), the A/A noise floor (the baseline against a
second copy of itself, per geometry, at every (re)start), and the baseline's attempt #0, recorded exactly once per
campaign even with several workers starting at once. ``BaselineSetup`` holds what these steps share; the campaign
calls them one by one, honouring a stop request between them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evo import stop
from evo.core.genome import Genome
from evo.core.protocols import Storage
from evo.core.records import BASELINE, Attempt, Code, Timing, Verdict, simulated_label
from evo.ledger.ledger import GenomeTaken
from evo.loop.attempt import now
from evo.loop.errors import CampaignError
from evo.loop.modules import LoadedModules
from evo.loop.report_lines import floor_lines, launches_note
from evo.loop.shared import POLL_S
from evo.measure import ceiling as ceiling_mod
from evo.report import nvbench_peer
from evo.search import Proposal
from gates import noise_floor, threshold
from gates.judge import reference_problem
from gates.pipeline.correctness import errors_by_geometry, hashes_by_geometry
from gates.stats import median, spread_pct


@dataclass
class Prepared:
    """The baseline built and loaded (``BaselineSetup.prepare``): the recorded baseline attempt of a resumed campaign,
    or, for a new one, its build and correctness evidence, to be recorded after the A/A (``pending``)."""

    base_resources: dict[str, Any]
    launches: dict[str, int]  # geometry -> the baseline's launches a graph (A/A)
    existing: Attempt | None = None
    pending: tuple[Any, Any] | None = None


@dataclass
class NoiseFloor:
    """The A/A: the campaign's noise floor per geometry, and the baseline's timings and clocks from it."""

    floors: dict[str, float]
    timing: dict[str, Timing] = field(default_factory=dict)
    clocks: dict[str, Any] = field(default_factory=dict)

    @property
    def floor(self) -> float:
        return max(self.floors.values())


@dataclass
class References:
    """What every judgement of the campaign is held against (``BaselineSetup.measure``)."""

    baseline: Attempt | None
    base_resources: dict[str, Any]  # the baseline's ptxas resources by module (the static gate)
    launches: dict[str, int]  # geometry -> the baseline's launches a graph (A/A)
    floors: dict[str, float]  # the A/A noise floor per geometry
    floor: float  # the largest of them: the perf gate's threshold
    ceiling: dict[str, float]  # the copy ceiling ("ceiling_tbps"), empty when not measured


class BaselineSetup:
    """The set-up steps of one campaign, over its seams. ``out`` prints (labelled where simulated); ``worker`` names
    this process in what it prints."""

    def __init__(
        self,
        cfg: Any,
        ledger: Storage,
        modules: LoadedModules,
        out: Callable[[str], None],
        worker: str,
    ):
        self.cfg, self.family, self.ledger = cfg, cfg.family, ledger
        self.modules = modules
        self.backend, self.builder, self.simulated = modules.backend, modules.builder, modules.simulated
        self.out = out
        self.worker = worker

    def measure(
        self,
        replaying: bool,
        check_resume: Callable[[], None],
        make_attempt: Callable[[int, Proposal, Any], Attempt],
    ) -> References:
        """The set-up's steps in order, a stop request honoured between them (evo/stop.py). ``check_resume``: on a
        shared storage, asked again before the baseline (another worker may have created the campaign since);
        ``make_attempt``: the campaign's new attempt (evo/loop/attempt.py), for a new campaign's attempt #0."""
        self.record_device(replaying)
        stop.check()
        ceiling = self.copy_ceiling()
        self.latency_floor()  # issue 31: beside the copy ceiling, an empty kernel launched as the candidates are
        stop.check()
        if self.ledger.shared:  # another worker may have created the campaign since our first check
            check_resume()
        prep = self.prepare()
        stop.check()
        aa = self.noise_floor(prep.launches)
        stop.check()
        baseline = prep.existing if prep.pending is None else self.record(prep.pending, aa, ceiling, make_attempt)
        return References(baseline, prep.base_resources, prep.launches, aa.floors, aa.floor, ceiling)

    def peer_timing(self) -> None:
        """torch.compile of the family's float32 reference, timed once per campaign where ``peer.torch_compile``
        asks for it: a peer the report shows beside the champion. An nvbench result of the baseline
        (``peer.nvbench``) is read once too (evo/report/nvbench_peer.py)."""
        try:
            names = [n for n in (self.family.entry, self.family.name) if n]
            pe = self.cfg.peer
            nvbench_peer.keep(pe.nvbench, pe.nvbench_benchmark, self.cfg.geometries, names, self.ledger, self.out)
        except nvbench_peer.NvbenchError as e:  # (the file changed since the config was read)
            raise CampaignError(f"peer.nvbench: {e}") from None
        mode = self.cfg.peer.torch_compile
        if mode == "off" or self.ledger.meta("peer_torch_compile") is not None:
            return
        weighted = [g for g in self.cfg.geometries if g.weight > 0]
        self.out(f"peer: timing torch.compile ({mode}) of the float32 reference ...")
        self.ledger.set_meta("peer_torch_compile", self.backend.peer_torch_compile(mode, weighted))

    def record_device(self, replaying: bool) -> None:
        """The device's facts (driver, NVRTC, CUDA) into the meta; a replay elsewhere keeps the campaign's device."""
        facts = self.backend.facts()
        facts.setdefault("nvrtc", _nvrtc_version())
        facts.setdefault("cuda", facts.get("cuda_driver"))
        if not replaying or self.ledger.meta("device") is None:
            self.ledger.set_meta("device", facts)

    def copy_ceiling(self) -> dict[str, float]:
        """The copy ceiling: measured once per campaign, then the ledger's."""
        ceiling = self.ledger.meta("copy_ceiling") or self.backend.copy_ceiling()
        self.ledger.set_meta("copy_ceiling", ceiling)
        return ceiling

    def latency_floor(self) -> None:
        """Measured once per campaign on the GPU (evo/measure/ceiling.py); the recorded backend serves the one its sweep
        measured, or has none and says so in the log. A failure is recorded with its reason: the floor is context,
        never a reason to stop."""
        if self.ledger.meta(ceiling_mod.FLOOR_META) is not None:
            return
        if self.simulated and not getattr(self.backend, "recorded_floor", lambda: None)():
            return
        p = self.cfg.gates.perf
        try:
            rec = ceiling_mod.measure_floor(self.backend, self.family, self.cfg.geometries, p.launch, p.rounds)
        except Exception as e:
            rec = {
                "backend": self.backend.name,
                "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            }
        self.ledger.set_meta(ceiling_mod.FLOOR_META, rec)
        self.out(ceiling_mod.describe_floor(rec, self.backend.name))

    def prepare(self) -> Prepared:
        """Build and load the baseline, freeze its output hashes (checked against the recorded ones on a resume) and
        size its graphs; CampaignError where its hashes moved or it is wrong against float64."""
        base_genome = self.family.baseline()
        built = self.builder.build(base_genome)
        if getattr(self.builder, "route_note", ""):  # compiler: auto says once which compiler builds the campaign
            self.out(self.builder.route_note)
        prep = Prepared({k: m.resources for k, m in built.modules.items()}, {})
        loaded = self.modules.load(built, base_genome)
        existing = next((a for a in self.ledger.attempts() if a.verdict.status == BASELINE), None)
        ev = self.backend.correctness(loaded, freeze=True)
        hashes = dict(self.backend.baseline_hashes)
        for g in self.cfg.geometries:
            n = self.backend.launches_for(loaded, g)
            prep.launches[g.name] = self.modules.sizes[Genome(base_genome).key, g.name] = n
        if existing is not None:
            moved = _moved(self.ledger.meta("baseline_hashes") or {}, hashes)
            if moved:
                raise CampaignError(
                    f"the baseline's output hash moved since the campaign started ({moved[0]}): "
                    "different GPU, driver or inputs; start a new campaign"
                )
            prep.existing = existing
            return prep
        # The baseline itself must be right against float64 before it can be the reference.
        problem = reference_problem(ev, self.family.error_bound)
        if problem:
            raise CampaignError(problem)
        # baseline_hashes/baseline_errors are written with the baseline attempt itself (record).
        prep.pending = (built, ev)
        return prep

    def noise_floor(self, launches: Mapping[str, int]) -> NoiseFloor:
        """A/A: the baseline against a second copy of itself, per geometry, at every (re)start; appended to the
        ledger's sessions and printed with what it means for a win."""
        base = self.family.baseline()
        a = self.modules.load(None if self.simulated else self.builder.build(base), base)
        b = self.backend.load(None if self.simulated else self.builder.build(base), base)
        p = self.cfg.gates.perf
        aa = NoiseFloor({})
        timings = {}
        for g in self.cfg.geometries:
            s = self.backend.measure([("A", a), ("B", b)], g, p.aa_rounds, launches[g.name])
            r = [x / y for x, y in zip(s.times_us["A"], s.times_us["B"])]
            aa.floors[g.name] = noise_floor(r, p.confidence) if len(r) >= 3 else 1.0
            if r:
                note = launches_note(p.launch, self.family, [("A", a)])
                aa.timing[g.name] = _aa_timing(
                    s, r, note + (f"; {simulated_label(self.backend)}" if self.simulated else "")
                )
            _merge_clocks(aa.clocks, s.clocks)
            timings[g.name] = _aa_summary(s, r)
        self._record_floor(aa, timings)
        return aa

    def _record_floor(self, aa: NoiseFloor, timings: dict[str, Any]) -> None:
        p = self.cfg.gates.perf
        # append_meta: under the study lock, so no other worker's session entry is lost (evo/loop/workers.py)
        self.ledger.append_meta(
            "sessions",
            {
                "at": now(),
                "floor": aa.floor,
                "floors": aa.floors,
                "aa": timings,
                "threshold": threshold(p.min_gain, aa.floor),
                "backend": self.backend.name,
            },
        )
        self.ledger.set_meta("noise_floor", aa.floors)
        self.ledger.set_meta("floor", aa.floor)
        for line in floor_lines(aa.floors, aa.floor, p):
            self.out(line)

    def record(
        self,
        pending: tuple[Any, Any],
        aa: NoiseFloor,
        ceiling: Mapping[str, float],
        make_attempt: Callable[[int, Proposal, Any], Attempt],
    ) -> Attempt:
        """Exactly once per campaign: of several workers starting at once one records the baseline, and the others
        wait for it and check their own frozen output hashes against it."""
        while True:
            try:
                return self._record_attempt(pending, aa, ceiling, make_attempt)
            except GenomeTaken as e:  # (shared storage only)
                self.out(f"worker {self.worker}: the baseline is being measured by attempt #{e.holder}; waiting")
                base = self._wait_for_baseline(e.holder)
            if base is not None:
                moved = _moved(self.ledger.meta("baseline_hashes") or {}, self.backend.baseline_hashes)
                if moved:
                    raise CampaignError(
                        f"this worker's baseline output hash differs from the campaign's ({moved[0]}):"
                        " different GPU, driver or inputs; it cannot join this campaign"
                    )
                return base
            # its holder died before recording it: try again

    def _wait_for_baseline(self, holder: int) -> Attempt | None:
        led = self.ledger
        while True:
            base = next((a for a in led.attempts() if a.verdict.status == BASELINE), None)
            if base is not None:
                return base
            if not any(t.number == holder for t in led.running()):
                return None
            led.recover()
            stop.check()
            time.sleep(POLL_S)

    def _record_attempt(
        self,
        pending: tuple[Any, Any],
        aa: NoiseFloor,
        ceiling: Mapping[str, float],
        make_attempt: Callable[[int, Proposal, Any], Attempt],
    ) -> Attempt:
        """A new campaign's attempt #0: the baseline, with its A/A timings as its own."""
        built, ev = pending
        led = self.ledger
        base_genome = self.family.baseline()
        t0 = time.perf_counter()
        trial = led.ask(fixed=base_genome)
        a = make_attempt(trial.number, Proposal(base_genome, "baseline (the family's defaults)"), built)
        a.verdict = Verdict(
            BASELINE, None, "the portable baseline; its output hashes are frozen as the reference", code=Code.BASELINE
        )
        a.output_hashes = hashes_by_geometry(ev)
        a.error_vs_ref = errors_by_geometry(ev)
        a.score = 1.0
        tbps = ceiling.get("ceiling_tbps")
        for g in self.cfg.geometries:
            t = aa.timing.get(g.name)
            if t is not None:
                a.timings[g.name] = t
                if tbps:
                    a.roofline_pct[g.name] = 100.0 * self.family.bytes_moved(g) / (t.median_us * 1e-6) / (tbps * 1e12)
        a.device = dict(aa.clocks)
        a.measure_s = time.perf_counter() - t0
        a.finished_at = now()
        # One transaction: the baseline attempt and the meta that points at it (a kill leaves both or neither).
        led.record(
            trial,
            a,
            meta={
                "baseline_hashes": dict(self.backend.baseline_hashes),
                "baseline_errors": dict(self.backend.baseline_errors),
                "baseline_id": trial.number,
            },
        )
        return a


def _moved(frozen: Mapping[str, Any], hashes: Mapping[str, Any]) -> list[str]:
    """The frozen output hashes (geometry -> hash) the baseline no longer gives."""
    return [k for k, v in frozen.items() if hashes.get(k) != v]


def _aa_timing(s: Any, r: list[float], note: str) -> Timing:
    """The baseline's own timing at a geometry, from its A/A samples ``s`` and their ratios ``r``."""
    return Timing(
        median(s.times_us["A"]),
        spread_pct(s.times_us["A"]),
        len(r),
        s.discarded,
        f"A/A: baseline vs a second copy of itself; batch: {s.batch_text()}; pairs: {len(r)}" + note,
    )


def _merge_clocks(into: dict[str, Any], clocks: Mapping[str, Any]) -> None:
    """The SM clocks seen over the A/A: the lowest minimum and the highest maximum."""
    for k, v in clocks.items():
        if isinstance(v, (int, float)) and k.startswith("sm_mhz"):
            f = min if k.endswith("min") else max
            into[k] = f(into.get(k, v), v)


def _aa_summary(s: Any, r: list[float]) -> dict[str, Any]:
    """A geometry's A/A as the session entry keeps it; with enough pairs, the ratios' spread and order effect."""
    out: dict[str, Any] = {
        "median_us": sorted(s.times_us["A"])[len(r) // 2] if r else None,
        "pairs": len(r),
        "discarded": s.discarded,
        "launches": s.launches,
    }
    if len(r) >= 4:  # enough to tell an offset (placement, order) from noise when the floor is high
        q = sorted(r)
        out.update(
            {
                "ratio_median": median(r),
                "ratio_p10": q[len(q) // 10],
                "ratio_p90": q[(9 * len(q)) // 10],
                "ratio_median_a_first": median(r[0::2]),
                "ratio_median_b_first": median(r[1::2]),
            }
        )
    return out


def _nvrtc_version() -> str:
    try:
        from harness.build import nvrtc_version

        return nvrtc_version()
    except Exception as e:
        return f"unavailable ({e})"
