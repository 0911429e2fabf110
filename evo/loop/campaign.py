"""A campaign: the loop config -> proposer -> builder -> gates -> ledger.

``Campaign.run`` starts a new campaign or resumes the one in its storage:
attempts already recorded are never repeated, and one left half-done by a
killed process is recorded as interrupted and may be proposed again.

This is the one campaign loop: ``evo run`` runs it, ``evo worker`` runs it on a
shared storage (``WorkerCampaign``, evo/loop/workers.py: each proposal reserved in
the ledger as it is made), and the search benchmark (tools/search_bench.py)
runs it on the recorded backend with a ledger in memory. Its seams
(evo/core/protocols.py): the backend (evo/backends.py's registry), the storage, and
the gates, judged by ``gates.judge.judge`` in the registry's order (gates/registry.py,
docs/gates.md) over a read-only ``JudgeContext`` (``Campaign.judge_context``); a
``harness.HarnessError`` is recorded as the error it names.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError

from evo import stop
from evo.config import CampaignConfig, narrow_to_recorded
from evo.core.genome import Genome
from evo.core.protocols import Backend, Gate, Storage
from evo.core.records import ACCEPTED, BASELINE, SIMULATED_LABEL, Attempt, Code, Verdict
from evo.core.variant import LaunchError, launch_digest
from evo.ledger.ledger import (
    BudgetDiffers,
    BudgetTaken,
    GenomeTaken,
    Ledger,
    SessionTaken,
    View,
    safe_url,
    worker_name,
)
from evo.loop.finish import run_finish_if_due
from evo.measure import ceiling as ceiling_mod
from evo.search import PROPOSERS, Proposal
from evo.search.ideas import campaign_book, idea_hook, idea_slugs, inexact_ideas
from gates import baseline_problem, noise_floor, threshold
from gates.judge import JudgeContext, judge
from gates.pipeline.correctness import errors_by_geometry, hashes_by_geometry
from gates.registry import GateError, gate_order
from harness.build import Builder, Built
from harness.errors import HarnessError

POLL_S = 0.2  # how often a worker waiting on others looks at the ledger again
# proposals in a row another worker reserved first before the step reads the ledger again (its running trials
# then tell the proposer what the others hold)
RESERVE_TRIES = 8


class CampaignError(Exception):
    """The campaign cannot start (one line for the user)."""


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class RunSummary:
    attempts: int
    new_attempts: int
    stopped: str
    champion: Attempt | None
    log_path: str | None = None


def make_backend(cfg: CampaignConfig, builder: Builder) -> Backend:
    """The config's backend from its registry entry (evo/backends.py); auto: the GPU when one is present, else the
    recorded H200 measurements. Isolated in a worker process where ``worker.isolation`` asks for it."""
    from evo.backends import REGISTRY
    from harness.gpu import gpu_available

    kind = cfg.backend
    if kind == "auto":
        kind = "gpu" if gpu_available() else "recorded"
    entry = REGISTRY.get(kind)
    if entry is None:
        raise CampaignError(f"backend: {kind} is not registered (registered: {', '.join(REGISTRY)})")
    if entry.needs_gpu and not gpu_available():
        raise CampaignError(f"backend: {kind} was asked for but no CUDA GPU is visible (use backend: recorded or auto)")
    if cfg.gates.perf.launch != "plain" and not entry.pdl:
        raise CampaignError(
            f"gates.perf.launch: {cfg.gates.perf.launch} needs a backend that times such launches ({kind} does not)"
        )
    isolate = cfg.worker.isolation == "worker" or (cfg.worker.isolation == "auto" and entry.isolate_by_default)
    try:
        if isolate:
            from harness.worker import WorkerBackend, WorkerCrash

            try:
                return WorkerBackend(
                    entry.worker,
                    {"config": str(cfg.path), "backend": kind, "storage": cfg.storage},
                    cfg.worker.timeout_s,
                )
            except WorkerCrash as e:
                raise CampaignError(f"the {kind} worker could not start: {e}") from None
        return entry.factory()(cfg, builder)
    except HarnessError as e:
        raise CampaignError(f"{entry.unavailable}{e}") from None


def config_fingerprint(cfg: CampaignConfig) -> dict[str, Any]:
    """What must stay the same for a campaign to be resumed."""
    return {
        "campaign": cfg.campaign,
        "family": cfg.family.name,
        "geometries": [{"name": g.name, "params": dict(g.params), "weight": g.weight} for g in cfg.geometries],
        "gates": asdict(cfg.gates),
        "knobs": {k.name: list(k.values) for k in cfg.family.knobs},
    }


class Campaign:
    """One campaign: set-up, then the loop (``run``) of propose, reserve, judge with the gates, record.

    Its seams (evo/core/protocols.py) default to the config's: ``backend`` (evo/backends.py's registry), ``builder``
    (NVRTC), ``storage`` (the config's ledger), ``gates`` (``gates.registry.gate_order()``), ``proposer`` (the
    config's, seeded per session). ``stop_when(attempts)``: a reason to stop the loop, checked at every step (the
    search benchmark's target); ``tabu``: False withholds the exact-mode tabu from the proposer (a benchmark's
    ablation). A worker (evo/loop/workers.py) is this loop on a shared storage.
    """

    SESSION_MODE = "run"  # one live evo run per campaign (Ledger.claim); WorkerCampaign: "worker"
    SHARED = False  # WorkerCampaign: the storage is shared with other workers (evo/ledger/ledger.py, "Shared mode")

    def __init__(
        self,
        cfg: CampaignConfig,
        *,
        on_attempt: Callable[[Attempt, Campaign], None] | None = None,
        out: Callable[[str], None] = print,
        command: str = "",
        replaying: bool = False,
        backend: Backend | None = None,
        builder: Any = None,
        storage: Storage | None = None,
        gates: Sequence[Gate] | None = None,
        proposer: Any = None,
        stop_when: Callable[[list[Attempt]], str | None] | None = None,
        tabu: bool = True,
    ):
        self.cfg = cfg
        self.family = cfg.family
        self.out: Callable[[str], None] = out
        self.on_attempt = on_attempt
        self.command = command or " ".join(sys.argv)
        self.replaying = replaying  # replay may re-judge a ledger made on another backend
        self.builder = builder if builder is not None else Builder.for_config(cfg)
        self.backend = backend if backend is not None else make_backend(cfg, self.builder)
        self.simulated = bool(getattr(self.backend, "simulated", False))
        if self.simulated:  # every line a user reads says where its numbers come from
            plain_out = out

            def labelled(msg: str) -> None:
                plain_out(f"{msg} ({SIMULATED_LABEL})")

            self.out = labelled
        # A backend that measures only part of the knob space (a recorded sweep of a sub-space) narrows the search to
        # it, so no proposal asks for a genome it cannot serve; said once, before anything is proposed.
        # The ledger's fingerprint stays the config's own: the same campaign may be replayed or resumed on a backend
        # that measures another part of the space (a GPU, a larger sweep).
        self.config_as_given = cfg
        space = getattr(self.backend, "knob_space", None)
        cfg, self.narrowed = narrow_to_recorded(cfg, space() if callable(space) else None)
        if self.narrowed:
            self.cfg, self.family = cfg, cfg.family
            self.out(f"{self.backend.name} backend: searching the knob values it measured ({'; '.join(self.narrowed)})")
        try:  # (an evo.gates plug-in that fails to import is the user's one-line error)
            self.gates: list[Gate] = list(gate_order() if gates is None else gates)
        except GateError as e:
            raise CampaignError(str(e)) from None
        self.proposer = proposer
        self.stop_when = stop_when
        self.use_tabu = tabu
        if storage is None:
            storage = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, shared=self.SHARED)
            if self.SHARED:
                storage.limit = cfg.budget.attempts
        self.ledger: Any = storage
        self.name = worker_name()  # names this process in messages (and, shared, in each attempt's device)
        self.taken = 0  # proposals another worker reserved first (shared storage)
        self._view: View | None = None  # the ledger as the loop's current step read it
        self._elapsed: Callable[[], float] | None = None  # the loop: the campaign's elapsed seconds now
        # ideas (evo/search/ideas.py): the source-level ideas this campaign may build, shared with builder and proposer
        used = {s for a in self.ledger.attempts() for s in idea_slugs(a.genome)}
        self.ideas, self._ideas_changed = campaign_book(
            cfg.family, self.ledger.meta("ideas"), used, folder=cfg.ideas.folder if cfg.ideas is not None else True
        )
        self.builder.source_hook = idea_hook(self.ideas)
        self.floor = 0.0
        self.floors: dict[str, float] = {}
        self.ceiling: dict[str, float] = {}
        self.baseline: Attempt | None = None
        self.champion: Attempt | None = None
        self._loaded: dict[str, Any] = {}
        self._base_resources: dict[str, Any] = {}
        self.launches: dict[str, int] = {}  # geometry -> the baseline's launches a graph (A/A)
        # (genome key, geometry) -> launches a graph of that genome's own: each part's graph is sized for itself.
        # With every part sized by the baseline, the fp4 champion's 55-launch graphs (1.1 ms) read 20.78 µs where
        # graphs of its own 410 launches read 20.29 in the same rounds
        # (benchmarks/results/2026-12-01-batch-sizing-probe).
        self._sizes: dict[tuple[str, str], int] = {}
        self._pending_baseline: tuple[Built, Any] | None = None
        self._aa_timing: dict[str, Any] = {}
        self._aa_clocks: dict[str, Any] = {}
        self._cycle_t0: float | None = None  # set by run(): an attempt's cycle_s counts from its proposal

    # --- setup ------------------------------------------------------------
    def _check_resume(self) -> None:
        old = self.ledger.meta("config")
        fp = config_fingerprint(self.config_as_given)
        if old is None:
            return
        old_backend = self.ledger.meta("backend")  # the more telling refusal first
        if old_backend and old_backend != self.backend.name and not self.replaying:
            raise CampaignError(
                f"campaign {self.cfg.campaign!r} was run on the {old_backend} backend and this machine uses "
                f"{self.backend.name}; rename the campaign or give another storage (--storage)"
            )
        for key in ("family", "geometries", "knobs"):
            if old.get(key) != fp[key]:
                raise CampaignError(
                    f"storage {self.cfg.storage} holds campaign {self.cfg.campaign!r} with different {key}; "
                    "rename the campaign or give another storage to start a new one"
                )

    def _load(self, built: Built | None, genome: Mapping[str, Any]):
        key = Genome(genome).key
        if key not in self._loaded:
            self._loaded[key] = self.backend.load(built, genome)
        return self._loaded[key]

    def _load_genome(self, genome: Mapping[str, Any]) -> Any:
        """A recorded genome's loaded module (the champion's, the baseline's): the cached one, else built (unless the
        backend is simulated) and loaded. Asked by the perf gate through ``JudgeContext.load_genome``."""
        key = Genome(genome).key
        if key in self._loaded:
            return self._loaded[key]
        return self._load(None if self.simulated else self.builder.build(genome), genome)

    def judge_context(self) -> JudgeContext:
        """What the gates may read of this campaign now (gates/judge.py); made for every attempt, as the champion
        changes. The campaign's capabilities go in as narrow callables, never the campaign itself."""
        from evo.measure.profile import load_profile

        return JudgeContext(
            family=self.family,
            builder=self.builder,
            backend=self.backend,
            config=self.cfg,
            ideas=self.ideas,
            simulated=self.simulated,
            baseline=self.baseline,
            champion=self.champion,
            base_resources=self._base_resources,
            floor=self.floor,
            floors=self.floors,
            ceiling=self.ceiling,
            load=self._load,
            load_genome=self._load_genome,
            launch_sha256=self.launch_sha256,
            part_launches=self.part_launches,
            launches_note=self._launches_note,
            inexact_ideas=lambda genome: inexact_ideas(genome, self.ideas),
            uses_ideas=lambda genome: bool(idea_slugs(genome)),
            sanitize=self._sanitizer,
            e2e=self._e2e,
            load_profile=load_profile,
        )

    def _preflight(self) -> None:
        """What refuses a resume, checked before anything is written."""
        self._check_resume()
        if self._ideas_changed:  # ideas: like a changed knob, a measured idea may not change its text
            raise CampaignError(
                f"idea(s) {', '.join(self._ideas_changed)} changed in {self.family.folder / 'ideas'} since campaign "
                f"{self.cfg.campaign!r} measured them; give the edited patch a new file name, or start a new campaign"
            )

    def setup(self) -> None:
        """Meta, A/A and the baseline; a stop request is honoured between its steps (evo/stop.py)."""
        self._preflight()
        stop.check()
        interrupted = self.ledger.recover()
        if interrupted:
            self.out(f"resume: {len(interrupted)} attempt(s) left running by a stopped process recorded as interrupted")
        led = self.ledger
        if led.meta("config") is None:
            # One transaction: a kill between these writes must not leave "config" without "backend".
            # create_meta: of several workers starting at once exactly one writes them (evo/loop/workers.py).
            led.create_meta(
                {
                    "config": {
                        **config_fingerprint(self.config_as_given),
                        **({"searched_knobs": self.narrowed} if self.narrowed else {}),
                        "budget": asdict(self.cfg.budget),
                        "proposer": asdict(self.cfg.proposer),
                        "storage": self.cfg.storage,
                        "command": self.command,
                        "seed": self.cfg.seed,
                    },
                    "backend": self.backend.name,
                    "simulated": self.simulated,
                    "started_at": now(),
                }
            )
        facts = self.backend.facts()
        facts.setdefault("nvrtc", _nvrtc_version())
        facts.setdefault("cuda", facts.get("cuda_driver"))
        if not self.replaying or led.meta("device") is None:  # a replay elsewhere keeps the campaign's device
            led.set_meta("device", facts)
        stop.check()
        self.ceiling = led.meta("copy_ceiling") or self.backend.copy_ceiling()
        led.set_meta("copy_ceiling", self.ceiling)
        self._latency_floor()  # issue 31: beside the copy ceiling, an empty kernel launched as the candidates are
        stop.check()
        self._baseline()
        stop.check()
        self._noise_floor()
        stop.check()
        self._record_baseline()
        stop.check()
        self.champion = led.champion() or self.baseline
        if self.cfg.ideas is not None:  # ideas: freeze the folder's ideas into the ledger (new ones are accepted)
            frozen = led.meta("ideas") or {}
            add = {s: i.to_record() for s, i in self.ideas.items() if frozen.get(s, {}).get("patch") != i.patch}
            if add:
                led.set_meta("ideas", {**frozen, **add})
        if self.cfg.peer.torch_compile != "off" and led.meta("peer_torch_compile") is None:
            weighted = [g for g in self.cfg.geometries if g.weight > 0]
            self.out(f"peer: timing torch.compile ({self.cfg.peer.torch_compile}) of the float32 reference ...")
            led.set_meta("peer_torch_compile", self.backend.peer_torch_compile(self.cfg.peer.torch_compile, weighted))

    def _latency_floor(self) -> None:
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

    def _baseline(self) -> None:
        if self.ledger.shared:  # another worker may have created the campaign since our first check
            self._check_resume()
        led = self.ledger
        base_genome = self.family.baseline()
        built = self.builder.build(base_genome)
        if getattr(self.builder, "route_note", ""):  # compiler: auto says once which compiler builds the campaign
            self.out(self.builder.route_note)
        self._base_resources = {k: m.resources for k, m in built.modules.items()}
        loaded = self._load(built, base_genome)
        existing = next((a for a in led.attempts() if a.verdict.status == BASELINE), None)
        ev = self.backend.correctness(loaded, freeze=True)
        hashes = dict(self.backend.baseline_hashes)
        for g in self.cfg.geometries:
            self.launches[g.name] = self._sizes[Genome(base_genome).key, g.name] = self.backend.launches_for(loaded, g)
        if existing is not None:
            frozen = led.meta("baseline_hashes") or {}
            moved = [k for k, v in frozen.items() if hashes.get(k) != v]
            if moved:
                raise CampaignError(
                    f"the baseline's output hash moved since the campaign started ({moved[0]}): "
                    "different GPU, driver or inputs; start a new campaign"
                )
            self.baseline = existing
            return
        # The baseline itself must be right against float64 before it can be the reference.
        problem = baseline_problem(ev, self.family.error_bound)
        if problem:
            raise CampaignError(problem)
        # baseline_hashes/baseline_errors are written with the baseline attempt itself (_record_baseline).
        self._pending_baseline = (built, ev)

    def _record_baseline(self) -> None:
        """Exactly once per campaign: of several workers starting at once one records the baseline, and the others
        wait for it and check their own frozen output hashes against it."""
        pending = self._pending_baseline
        while pending is not None:
            self._pending_baseline = pending
            try:
                self._record_baseline_attempt()
                return
            except GenomeTaken as e:  # (shared storage only)
                self.out(f"worker {self.name}: the baseline is being measured by attempt #{e.holder}; waiting")
                base = self._wait_for_baseline(e.holder)
            if base is not None:
                self._pending_baseline = None
                frozen = self.ledger.meta("baseline_hashes") or {}
                moved = [k for k, v in frozen.items() if self.backend.baseline_hashes.get(k) != v]
                if moved:
                    raise CampaignError(
                        f"this worker's baseline output hash differs from the campaign's ({moved[0]}):"
                        " different GPU, driver or inputs; it cannot join this campaign"
                    )
                self.baseline = base
                return
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

    def _record_baseline_attempt(self) -> None:
        """A new campaign's attempt #0: the baseline, with its A/A timings as its own."""
        if self._pending_baseline is None:
            return
        built, ev = self._pending_baseline
        self._pending_baseline = None
        led = self.ledger
        base_genome = self.family.baseline()
        t0 = time.perf_counter()
        trial = led.ask(fixed=base_genome)
        a = self._attempt(trial.number, Proposal(base_genome, "baseline (the family's defaults)"), built)
        a.verdict = Verdict(
            BASELINE, None, "the portable baseline; its output hashes are frozen as the reference", code=Code.BASELINE
        )
        a.output_hashes = hashes_by_geometry(ev)
        a.error_vs_ref = errors_by_geometry(ev)
        a.score = 1.0
        ceiling = self.ceiling.get("ceiling_tbps")
        for g in self.cfg.geometries:
            t = self._aa_timing.get(g.name)
            if t is not None:
                a.timings[g.name] = t
                if ceiling:
                    a.roofline_pct[g.name] = (
                        100.0 * self.family.bytes_moved(g) / (t.median_us * 1e-6) / (ceiling * 1e12)
                    )
        a.device = dict(self._aa_clocks)
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
        self.baseline = a

    def part_launches(self, parts: Sequence[tuple[str, Any]], keys: Sequence[str], g: Any) -> dict[str, int]:
        """Label -> launches a graph, each part's for itself (about batch_ms), remembered by genome key."""
        out = {}
        for (label, loaded), key in zip(parts, keys):
            if (key, g.name) not in self._sizes:
                self._sizes[key, g.name] = self.backend.launches_for(loaded, g)
            out[label] = self._sizes[key, g.name]
        return out

    def _launches_note(self, parts, g) -> str:
        """'; launches: cand PDL, base plain' under gates.perf.launch = pdl (nothing under plain launches): only a
        kernel the family calls PDL-safe (Family.pdl_safe) is launched with PDL."""
        if self.cfg.gates.perf.launch == "plain":
            return ""
        return "; launches: " + ", ".join(
            f"{lb} {'PDL' if self.family.pdl_safe(ld.genome) else 'plain'}" for lb, ld in parts
        )

    def _noise_floor(self) -> None:
        """A/A: the baseline against a second copy of itself, per geometry, at every (re)start."""
        base = self.family.baseline()
        a = self._load(None if self.simulated else self.builder.build(base), base)
        b = self.backend.load(None if self.simulated else self.builder.build(base), base)
        p = self.cfg.gates.perf
        floors, timings = {}, {}
        from evo.core.records import Timing
        from gates.stats import median, spread_pct

        for g in self.cfg.geometries:
            s = self.backend.measure([("A", a), ("B", b)], g, p.aa_rounds, self.launches[g.name])
            r = [x / y for x, y in zip(s.times_us["A"], s.times_us["B"])]
            floors[g.name] = noise_floor(r, p.confidence) if len(r) >= 3 else 1.0
            if r:
                self._aa_timing[g.name] = Timing(
                    median(s.times_us["A"]),
                    spread_pct(s.times_us["A"]),
                    len(r),
                    s.discarded,
                    f"A/A: baseline vs a second copy of itself; batch: {s.batch_text()}; pairs: {len(r)}"
                    + self._launches_note([("A", a)], g)
                    + (f"; {SIMULATED_LABEL}" if self.simulated else ""),
                )
            for k, v in s.clocks.items():
                if isinstance(v, (int, float)) and k.startswith("sm_mhz"):
                    f = min if k.endswith("min") else max
                    self._aa_clocks[k] = f(self._aa_clocks.get(k, v), v)
            timings[g.name] = {
                "median_us": sorted(s.times_us["A"])[len(r) // 2] if r else None,
                "pairs": len(r),
                "discarded": s.discarded,
                "launches": s.launches,
            }
            if len(r) >= 4:  # enough to tell an offset (placement, order) from noise when the floor is high
                q = sorted(r)
                timings[g.name].update(
                    {
                        "ratio_median": median(r),
                        "ratio_p10": q[len(q) // 10],
                        "ratio_p90": q[(9 * len(q)) // 10],
                        "ratio_median_a_first": median(r[0::2]),
                        "ratio_median_b_first": median(r[1::2]),
                    }
                )
        self.floors = floors
        self.floor = max(floors.values())
        # append_meta: under the study lock, so no other worker's session entry is lost (evo/loop/workers.py)
        self.ledger.append_meta(
            "sessions",
            {
                "at": now(),
                "floor": self.floor,
                "floors": floors,
                "aa": timings,
                "threshold": threshold(p.min_gain, self.floor),
                "backend": self.backend.name,
            },
        )
        self.ledger.set_meta("noise_floor", floors)
        self.ledger.set_meta("floor", self.floor)
        msg = ", ".join(f"{k} {v:.3%}" for k, v in floors.items())
        self.out(
            f"A/A noise floor: {msg}; a win needs > {threshold(p.min_gain, self.floor):.4f}x "
            + ("on every weighted geometry" if p.rule == "every" else "in the weighted mean of the weighted geometries")
        )
        if self.floor > p.max_floor:
            self.out(
                f"warning: the noise floor {self.floor:.3%} is above gates.perf.max_floor {p.max_floor:.3%}; "
                "wins must clear 3x the floor, so fewer will be found"
            )

    # --- one attempt --------------------------------------------------------
    def _attempt(self, number: int, prop: Proposal, built: Built | None) -> Attempt:
        a = Attempt(
            id=number,
            campaign=self.cfg.campaign,
            family=self.family.name,
            genome=dict(prop.genome),
            genome_key=prop.genome.key,
            origin=prop.origin,
            derived_from=list(prop.derived_from),
            finish=getattr(prop, "finish", None),  # the finish's tag (evo/loop/finish.py)
            parent_id=self.champion.id if self.champion else None,
            backend=self.backend.name,
            started_at=now(),
        )
        if built is not None:  # the baseline's: its launch() runs on every measurement, an error ends the run there
            a.source_sha256, a.cubin_sha256, a.sass_sha256 = built.source_sha256, built.cubin_sha256, built.sass_sha256
            a.resources = {k: m.resources for k, m in built.modules.items()}
            a.compile_s = round(built.compile_s, 3)
            try:
                a.launch_sha256 = self.launch_sha256(prop.genome)
            except LaunchError as e:
                raise CampaignError(f"the baseline: {e}") from None
        return a

    def launch_sha256(self, genome: Any) -> str:
        """The genome's launch digest at the campaign's geometries (evo/core/variant.py), with PDL where the campaign
        launches so; asked after each build. Raises LaunchError."""
        return launch_digest(self.family, genome, self.cfg.geometries, self.cfg.gates.perf.launch == "pdl")

    def evaluate(
        self, prop: Proposal, source: str | None = None, remeasure: bool = False, trial: Any = None
    ) -> Attempt:
        """Judge one proposal with the gates, in ``self.gates`` order; the storage records what comes back, whatever
        the verdict.

        ``trial``: one already asked for ``prop.genome`` (the loop reserves a genome when it proposes it on a
        shared storage); else it is asked here.
        """
        if trial is None:
            trial = self.ledger.ask(fixed=prop.genome)
        a = self._attempt(trial.number, prop, None)
        # ideas: a proposal may bring new ideas (kept from now on), or be a failed outside answer (recorded as is)
        fresh = list(getattr(prop, "new_ideas", None) or [])
        for idea in fresh:
            self.ideas[idea.slug] = idea
        a.notes += list(getattr(prop, "notes", None) or [])
        meta = self._ideas_meta(prop.genome)
        failure = getattr(prop, "failure", None)  # an outside proposer's answer that could not become a genome
        if failure is not None:
            a.verdict = failure
            self._finish(trial, a, meta)
            return a
        try:
            judge(
                prop,
                self.judge_context(),
                a,
                source=source,
                remeasure=remeasure,
                recorded=self._recorded(),
                gates=self.gates,
            )
        except HarnessError as e:  # the harness's one error base: recorded as its kind, and the run goes on
            a.verdict = Verdict.error(e.kind, e.reason(), gate=e.gate)
            self._finish(trial, a, meta)
            if e.fatal:  # the device state is lost with it: nothing more can be measured in this process
                raise
            if source is None:  # (a source variant never took the genome's cached module) a dead worker's is gone
                self._loaded.pop(prop.genome.key, None)
            return a
        except Exception as e:  # a bug must not lose the attempt record
            a.verdict = Verdict.error("harness", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            self._finish(trial, a, meta)
            raise
        self._finish(trial, a, meta)
        if a.verdict.status == ACCEPTED:
            self.champion = a
        self._write_ideas(fresh)
        return a

    def _finish(self, trial: Any, a: Attempt, meta: Mapping[str, Any] | None) -> None:
        """Every attempt evaluate() makes is recorded here; in the loop the campaign's elapsed_s rides with it (one
        write, and with several workers the largest of their values stays)."""
        a.finished_at = now()
        self._stamp(a)
        if self._elapsed is None:
            self.ledger.record(trial, a, meta=meta)
        else:
            self.ledger.record(trial, a, meta=meta, meta_max={"elapsed_s": self._elapsed()})

    def _recorded(self) -> list[Attempt]:
        """The attempts a new one is held against (identical SASS): the loop's step read them; else read now."""
        return self._view.attempts if self._view is not None else self.ledger.attempts()

    def _stamp(self, a: Attempt) -> None:
        if self._cycle_t0 is not None:
            a.cycle_s = round(time.perf_counter() - self._cycle_t0, 3)

    # --- ideas (evo/search/ideas.py) ---------------------------------------------------
    def _ideas_meta(self, genome: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ledger's frozen ideas plus any this genome uses for the first time (written with its attempt)."""
        slugs = idea_slugs(genome)
        if not slugs:  # a knob genome: no read of the ledger's ideas
            return None
        frozen = self.ledger.meta("ideas") or {}
        missing = [s for s in slugs if s not in frozen and s in self.ideas]
        if not missing:
            return None
        return {"ideas": {**frozen, **{s: self.ideas[s].to_record() for s in missing}}}

    def _write_ideas(self, ideas: list[Any]) -> None:
        """Ideas an outside proposer made, as patch files beside the log (``evo idea add`` takes them)."""
        for idea in ideas:
            try:
                d = self.cfg.log_dir / "ideas"
                d.mkdir(parents=True, exist_ok=True)
                (d / f"{idea.slug}.patch").write_text(idea.text())
            except OSError as e:
                self.out(f"warning: could not write idea {idea.slug} beside the log: {e}")

    def _sanitizer(self, a: Attempt, source_variant: bool) -> Verdict:
        """The sanitizer gate (issue 31): compute-sanitizer over a step that passed perf, judged against the family's
        suppressions (gates/sanitizer.py); the accepted verdict carries the result in ``detail["sanitizer"]``."""
        from evo.measure.sanitize import gate_step

        res = gate_step(self.cfg, a, self.ideas, self.backend.name, self.simulated, source_variant, self.out)
        if not res.verdict.ok:
            return res.verdict
        return Verdict.accepted(a.verdict.reason, {**a.verdict.detail, "sanitizer": res.record})

    def _genome_file(self, a: Attempt) -> Any:
        from evo.measure.e2e import write_genome_file

        return write_genome_file(self.cfg.log_dir / "e2e" / f"genome-{a.id}.json", {self.family.name: a.genome})

    def _e2e_frozen(self) -> dict[str, Any]:
        """The baseline's token stream hash and tokens/s, measured once per campaign."""
        from evo.measure.e2e import run_e2e

        frozen = self.ledger.meta("e2e_frozen")
        if frozen is None:
            e = self.cfg.e2e
            assert e is not None and self.baseline is not None
            r = run_e2e(list(e.command), self._genome_file(self.baseline), e.runs, e.timeout_s, e.env)
            frozen = {"hash": r.hash, "median": r.median, "spread": r.spread, "argv": r.argv, "at": now()}
            self.ledger.set_meta("e2e_frozen", frozen)
        return frozen

    def _e2e(self, a: Attempt) -> None:
        """Observe the step end to end: champion and candidate decode interleaved, held against the bound."""
        from evo.measure.e2e import MEASUREMENT_ERROR, REJECTED, E2EError, compare_e2e, judge

        e = self.cfg.e2e
        champ = self.champion or self.baseline
        assert e is not None and a.bound is not None and champ is not None
        try:
            frozen = self._e2e_frozen()
            base, cand, gain = compare_e2e(
                list(e.command), self._genome_file(champ), self._genome_file(a), e.runs, e.timeout_s, e.env
            )
        except E2EError as err:
            a.bound.update({"e2e": "error", "e2e_reason": str(err), "claim": False})
            a.notes.append(f"e2e: {err}")
            return
        verdict, reason = judge(gain, a.bound["bound"], a.bound["decode_floor"], cand.hash, frozen["hash"])
        a.bound.update(
            {
                "observed": gain,
                "e2e": verdict,
                "e2e_reason": reason,
                "tokens_per_s": cand.median,
                "champion_tokens_per_s": base.median,
                "token_hash": cand.hash,
            }
        )
        if verdict == REJECTED:
            a.verdict = Verdict.rejected("e2e", reason, Code.E2E_TOKENS)
        elif verdict == MEASUREMENT_ERROR:
            a.bound["claim"] = False  # the kernel step stands on its own evidence; the decode figure does not

    def ceiling_check(self) -> dict[str, Any] | None:
        """The champion against the copy ceiling, measured alternately (evo/measure/ceiling.py), appended to the
        ledger's ``ceiling_checks``. Called at the end of a run; a failure is recorded with its reason and loses
        nothing."""
        p = self.cfg.gates.perf
        champ = self.champion or self.baseline
        geos = [g for g in self.cfg.geometries if g.weight > 0 and self.family.bytes_moved(g)]
        if not p.ceiling_check or champ is None or not geos:
            return None
        check: dict[str, Any] = {
            "champion": champ.id,
            "genome_key": champ.genome_key,
            "at": now(),
            "backend": self.backend.name,
            "simulated": self.simulated,
            "method": (
                f"{p.ceiling_check} alternations of one copy-ceiling trial and the "
                f"champion's {p.rounds} batches (graph x launches of about "
                f"{p.batch_ms:g} ms, median; throttled rounds dropped) at each weighted "
                "geometry, the ceiling first in every other one; each alternation's own "
                "ratio"
            ),
        }
        check["method"] += self._launches_note([("champ", champ)], geos[0])
        try:
            loaded = self._load(None if self.simulated else self.builder.build(champ.genome), champ.genome)
            # batches of about batch_ms of the champion itself, as the campaign timed it
            launches = {g.name: self.part_launches([("champ", loaded)], [champ.genome_key], g)["champ"] for g in geos}
            check["launches"] = launches
            trials = ceiling_mod.run_check(self.backend, loaded, geos, launches, p.rounds, p.ceiling_check)
            check["trials"] = trials
            check["geometries"] = ceiling_mod.summarize(trials, {g.name: self.family.bytes_moved(g) for g in geos})
        except Exception as e:  # a GPU fault here must not cost the campaign its ledger
            check["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        except KeyboardInterrupt:  # Ctrl-C during the check ends the run as the loop's would, with a record
            check["error"] = "interrupted by the user"
        self.ledger.append_meta("ceiling_checks", check)  # (workers sharing a campaign each add theirs)
        for line in ceiling_mod.describe(check):
            self.out(f"champion #{champ.id} against the copy ceiling, side by side: {line}")
        return check

    # --- the loop -------------------------------------------------------------
    def _prefetcher(self):
        """Compile processes ahead of the GPU (evo/loop/prefetch.py), or None (worker.prefetch 0 / auto off-GPU)."""
        n = self.cfg.worker.prefetch
        if n < 0:
            n = 0 if self.simulated else 1
        if n == 0 or self.cfg.path is None:
            return None
        from evo.loop.prefetch import Prefetcher

        return Prefetcher(str(self.cfg.path), self.builder.arch, n)

    @staticmethod
    def _compile_ahead(
        prefetch: Any,
        prop: Proposal,
        propose_next: Callable[[], Any],
        genome_of: Callable[[Any], Genome] = lambda p: p.genome,
    ) -> Any:
        """Compile ``prop`` and the proposal after it (``propose_next()``, None for none) in the prefetch processes;
        return that next one once ``prop``'s build is in the cache. Like a second worker, the next proposal lags
        one result. ``genome_of``: the genome of what ``propose_next`` returns (evo worker: a reserved trial's)."""
        prefetch.submit(prop.genome)
        pending = propose_next()
        if pending is not None:
            prefetch.submit(genome_of(pending))
        prefetch.wait(prop.genome)
        return pending

    def tabu(self, attempts: list[Attempt] | None = None) -> dict[str, list[Any]]:
        """Knob values the exact-mode correctness gate ruled out: proposing them again wastes attempts.

        ``attempts``: the ledger's, when the caller has just read them (else they are read here).
        """
        return exact_mode_tabu(
            self.ledger.attempts() if attempts is None else attempts,
            self.family.baseline(),
            self.cfg.gates.correctness.mode,
        )

    def _spent_before_start(self, elapsed: float) -> RunSummary | None:
        """A resume (`evo run` again) of a campaign whose budget was already spent: the summary of what is recorded,
        with nothing measured (no A/A floor, baseline or ceiling check again: they would change nothing judged).
        None where there is work to do, or where this is not a lone run's resume (workers, replays, stop_when)."""
        led = self.ledger
        if led.shared or self.replaying or self.stop_when is not None or led.meta("config") is None:
            return None
        attempts = led.attempts()
        if not any(a.verdict.status == "baseline" for a in attempts):
            return None
        _, spent = self.budget_spent(attempts, elapsed)
        if spent is None:
            return None
        self.out(f"resume: {spent} before this run; nothing measured (raise the budget to go on)")
        self.champion = led.champion()
        return RunSummary(len(attempts), 0, spent, self.champion)

    def budget_spent(self, attempts: list[Attempt], elapsed: float) -> tuple[list[Attempt], str | None]:
        """The attempts that count against the budget, and why the budget is spent (None while it is not)."""
        budget = self.cfg.budget
        counted = [x for x in attempts if x.verdict.kind != "interrupted"]
        if budget.attempts is not None and len(counted) >= budget.attempts:
            return counted, f"attempt budget reached ({len(counted)}/{budget.attempts})"
        if budget.minutes is not None and elapsed >= budget.minutes * 60:
            return counted, f"time budget reached ({elapsed / 60:.1f}/{budget.minutes:g} min)"
        return counted, None

    def claim(self) -> None:
        """Register this process as the campaign's runner, or CampaignError naming the one that runs it."""
        if getattr(self.ledger, "_session_key", None) is None:
            self._preflight()  # a refused resume leaves the ledger as it was, session row included
        try:
            self.ledger.claim(self.SESSION_MODE)
        except BudgetDiffers as e:  # the attempt budget is one for all workers: each would stop at its own
            raise CampaignError(
                f"campaign {self.cfg.campaign!r} at {safe_url(self.cfg.storage)}: {e}; workers share one attempt "
                "budget: give the same --attempts, or wait for it to end"
            ) from None
        except SessionTaken as e:
            also = (
                "several processes share a campaign only as evo worker"
                if self.SESSION_MODE == "run" and e.holder.get("mode") != "worker"
                else "evo worker joins only while no evo run runs it"
            )
            raise CampaignError(
                f"campaign {self.cfg.campaign!r} at {safe_url(self.cfg.storage)} is being run by {e}; "
                f"wait for it to end or stop it ({also}; a killed one elsewhere counts as stopped "
                f"{self.ledger.grace_s} s after its last heartbeat)"
            ) from None

    def run(self) -> RunSummary:
        self.claim()
        try:
            return self._run()
        finally:
            self.ledger.release()

    def proposer_seed(self, n_before: int) -> int:
        """The proposer's seed: it differs per session, so that a resumed campaign does not replay the same random
        stream, and per worker on a shared storage, so that workers do not all propose the same genomes."""
        seed = self.cfg.seed * 7919 + n_before
        return seed + zlib.crc32(self.name.encode()) % 1_000_003 if self.ledger.shared else seed

    def make_proposer(self, n_before: int) -> Any:
        """The config's proposer, wrapped in the idea layer (idea toggles, the knob search in the champion's idea
        context, the outside proposer; transparent where no idea is in play)."""
        from evo.search.outside import IdeaLayer

        cfg = self.cfg
        seed = self.proposer_seed(n_before)
        inner = PROPOSERS[cfg.proposer.name](self.family, cfg.geometries, cfg.proposer.options, seed, tabu=self.tabu())
        inner.correctness_mode = cfg.gates.correctness.mode  # known from the config, not only from the verdicts
        return IdeaLayer(
            inner, self.family, cfg.geometries, self.ideas, cfg.ideas, seed, self.builder.source_for, self.out
        )

    def _recover(self) -> None:
        lost = self.ledger.recover()
        if lost:
            self.out(
                f"worker {self.name}: {len(lost)} attempt(s) of a stopped worker recorded as interrupted "
                f"({', '.join(f'#{n}' for n in lost)})"
            )

    def _reserve(self, proposer: Any, attempts: list[Attempt], seen: set[str]) -> tuple[Proposal, Any] | None:
        """Propose a genome: (proposal, its trial), or None when nothing is left.

        On a shared storage the genome is reserved at once (its trial RUNNING, so that other workers propose
        something else); elsewhere the trial is None and evaluate() asks it. Called by the loop for the proposal to
        measure now and for the one compiled ahead. A genome another worker reserved first is counted in
        ``taken`` and left out of the next proposal, made at once; after RESERVE_TRIES of them GenomeTaken passes
        on, as does BudgetTaken.
        """
        seen = set(seen)
        for n in range(RESERVE_TRIES):
            prop = proposer.propose(attempts, seen)
            if prop is None or not self.ledger.shared:
                return None if prop is None else (prop, None)
            try:
                return prop, self.ledger.ask(fixed=prop.genome)
            except GenomeTaken as e:
                self.taken += 1
                seen.add(e.genome_key)
                if n == RESERVE_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _run(self) -> RunSummary:
        """The campaign loop (``evo run``, ``evo worker``, the search benchmark): set-up, then propose, judge and
        record until the budget is spent, the space exhausted, ``stop_when`` says so, or a stop is asked for."""
        t_start = time.monotonic()  # budget.minutes counts the set-up (A/A, baseline) too
        led, budget = self.ledger, self.cfg.budget
        start_elapsed = float(led.meta("elapsed_s") or 0.0)
        self._elapsed = lambda: start_elapsed + time.monotonic() - t_start
        led.elapsed_fn = self._elapsed  # the session heartbeat keeps elapsed_s current between attempts, set-up too
        done = self._spent_before_start(start_elapsed)
        if done is not None:
            return done
        self.setup()
        proposer = self.proposer if self.proposer is not None else self.make_proposer(len(led.attempts()))
        new = 0
        stopped = "budget"
        last_check = time.monotonic()
        if self.on_attempt and self.baseline is not None:
            self.on_attempt(self.baseline, self)

        def wait() -> None:
            stop.check()
            time.sleep(POLL_S)

        def measure(prop: Proposal, trial: Any) -> None:
            nonlocal new
            # against the ledger's champion as this step read it (on a shared storage another worker may have
            # accepted a step since this one's last attempt)
            self.champion = (self._view.champion() if self._view is not None else None) or self.baseline
            try:
                a = self.evaluate(prop, trial=trial)
            except UpdateFinishedTrialError as e:  # we were taken for dead (no heartbeat for the grace period)
                self.out(
                    f"worker {self.name}: an attempt was recovered by another worker before it was "
                    f"recorded ({e}); its result is dropped and its genome may be proposed again"
                )
                return
            new += 1
            if self.on_attempt:
                self.on_attempt(a, self)

        prefetch = self._prefetcher()
        # (proposal, its trial: None until evaluate asks it, except on a shared storage) proposed one step ahead
        # and compiled while the GPU measured (worker.prefetch)
        pending: tuple[Proposal, Any] | None = None
        try:
            while True:
                stop.check()  # the safe point of the loop: between attempts
                self._cycle_t0 = time.perf_counter()
                if led.shared and time.monotonic() - last_check >= led.heartbeat_s:  # the check for dead workers
                    self._recover()
                    last_check = time.monotonic()
                view = self._view = led.view()
                counted, spent = self.budget_spent(view.attempts, self._elapsed())
                spent = spent or (self.stop_when(view.attempts) if self.stop_when is not None else None)
                if spent:
                    stopped = spent
                    if pending is not None and pending[1] is not None:  # reserved and compiled: measured, not left
                        prop, trial = pending  # RUNNING (one attempt over a time budget; the attempt budget had
                        pending = None  # room for it when it was asked)
                        if prefetch is not None:
                            prefetch.wait(prop.genome)
                        measure(prop, trial)
                    break
                ran = run_finish_if_due(self, view)  # near-champions head to head when due (evo/loop/finish.py)
                if ran is not None:
                    new += ran
                    continue
                full = budget.attempts is not None and len(counted) + len(view.running) >= budget.attempts
                if full and pending is None and led.shared:  # (a pending trial of ours is within the budget)
                    wait()  # the rest of the budget is being measured by others; one may still be interrupted
                    continue
                if self.use_tabu:
                    proposer.tabu = {k: set(v) for k, v in self.tabu(view.attempts).items()}
                got, pending = pending, None
                if got is not None and got[1] is None and got[0].genome.key in view.seen:
                    got = None  # (not reserved, and judged meanwhile)
                if got is None:
                    try:
                        got = self._reserve(proposer, view.attempts, view.seen)
                    except GenomeTaken:  # taken RESERVE_TRIES times in a row: read what the others hold
                        continue
                    except BudgetTaken:
                        wait()
                        continue
                    if got is None:
                        if view.running and led.shared:  # a running attempt may yet be interrupted and freed
                            wait()
                            continue
                        stopped = "search space exhausted (every valid genome was tried)"
                        ran = run_finish_if_due(self, view, ending=stopped)
                        if ran is not None:
                            new += ran
                            continue
                        break
                prop, trial = got
                if prefetch is not None:

                    def reserve_next(prop: Proposal = prop, view: View = view) -> tuple[Proposal, Any] | None:
                        try:
                            return self._reserve(proposer, view.attempts, view.seen | {prop.genome.key})
                        except (GenomeTaken, BudgetTaken):  # the next step proposes in-line
                            return None

                    pending = self._compile_ahead(prefetch, prop, reserve_next, genome_of=lambda p: p[0].genome)
                measure(prop, trial)
        except KeyboardInterrupt:  # reserved trials are left RUNNING: recover() records them as interrupted
            stopped = "interrupted by the user"
        finally:
            self._cycle_t0 = None
            self._view = None
            self._elapsed = None
            led.elapsed_fn = None
            if prefetch is not None:
                prefetch.close()
            if not led.shared:  # (workers: elapsed_s rides with each attempt; a final write could lower another's)
                led.set_meta("elapsed_s", start_elapsed + time.monotonic() - t_start)
        self.champion = led.champion() or self.baseline
        if stopped != "interrupted by the user":
            self.ceiling_check()  # (each worker its own, on its GPU: each appends one)
        return RunSummary(len(led.attempts()), new, stopped, self.champion)


def exact_mode_tabu(attempts: Sequence[Attempt], baseline: Mapping[str, Any], mode: str) -> dict[str, list[Any]]:
    """Knob -> values the exact-mode correctness gate ruled out in ``attempts`` (read from each rejection's code and
    the knobs its detail names); empty in any other mode."""
    out: dict[str, list[Any]] = {}
    if mode != "exact":
        return out
    for a in attempts:
        if a.verdict.code is Code.CORRECTNESS_INEXACT_KNOB:
            for k in a.verdict.detail.get("knobs", ()):
                if k in baseline and a.genome[k] != baseline[k]:
                    out.setdefault(k, []).append(a.genome[k])
    return out


def _nvrtc_version() -> str:
    try:
        from harness.build import nvrtc_version

        return nvrtc_version()
    except Exception as e:
        return f"unavailable ({e})"
