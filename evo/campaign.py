"""A campaign: the loop config -> proposer -> builder -> gates -> ledger.

``Campaign.run`` starts a new campaign or resumes the one in its storage:
attempts already recorded are never repeated, and one left half-done by a
killed process is recorded as interrupted and may be proposed again.
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evo import ceiling as ceiling_mod
from evo import stop
from evo.config import CampaignConfig
from evo.genome import Genome
from evo.ideas import IdeaError, campaign_book, idea_hook, idea_slugs, inexact_ideas
from evo.ledger import Ledger, SessionTaken, safe_url
from evo.proposers import PROPOSERS, Proposal
from evo.records import ACCEPTED, BASELINE, Attempt, Code, Verdict
from gates import (
    CorrectnessEvidence,
    EarlyStop,
    PairSamples,
    baseline_problem,
    correctness_gate,
    identical_sass,
    noise_floor,
    perf_gate,
    static_gate,
    threshold,
)
from harness.build import Builder, BuildError, Built

SIMULATED_LABEL = "simulated from recorded H200 measurements"


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


def make_backend(cfg: CampaignConfig, builder: Builder):
    """auto: the GPU when one is present, else the recorded H200 measurements."""
    from harness.gpu import gpu_available

    kind = cfg.backend
    if kind == "auto":
        kind = "gpu" if gpu_available() else "recorded"
    c = cfg.gates.correctness
    isolate = cfg.worker.isolation == "worker" or (cfg.worker.isolation == "auto" and kind == "gpu")
    if isolate:
        from harness.worker import WorkerBackend, WorkerCrash

        if kind == "gpu" and not gpu_available():
            raise CampaignError("backend: gpu was asked for but no CUDA GPU is visible (use backend: recorded or auto)")
        from evo.backends import WORKER_FACTORIES

        factory = WORKER_FACTORIES[kind]
        try:
            return WorkerBackend(
                factory, {"config": str(cfg.path), "backend": kind, "storage": cfg.storage}, cfg.worker.timeout_s
            )
        except WorkerCrash as e:
            raise CampaignError(f"the {kind} worker could not start: {e}") from None
    if kind == "gpu":
        if not gpu_available():
            raise CampaignError("backend: gpu was asked for but no CUDA GPU is visible (use backend: recorded or auto)")
        from harness.gpu import GpuBackend

        return GpuBackend.for_config(cfg, builder)
    from harness.recorded import NotRecorded, RecordedBackend

    if cfg.gates.perf.launch != "plain":
        raise CampaignError(
            f"gates.perf.launch: {cfg.gates.perf.launch} needs a GPU (the recorded sweeps time plain launches)"
        )
    try:
        return RecordedBackend(cfg.family, cfg.geometries, seeds=c.seeds, runs=c.runs)
    except NotRecorded as e:
        raise CampaignError(f"no GPU here and {e}") from None


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
    def __init__(
        self,
        cfg: CampaignConfig,
        *,
        on_attempt: Callable[[Attempt, Campaign], None] | None = None,
        out: Callable[[str], None] = print,
        command: str = "",
        replaying: bool = False,
        backend: Any = None,
    ):
        self.cfg = cfg
        self.family = cfg.family
        self.out = out
        self.on_attempt = on_attempt
        self.command = command or " ".join(sys.argv)
        self.replaying = replaying  # replay may re-judge a ledger made on another backend
        self.builder = Builder.for_config(cfg)
        self.backend = backend if backend is not None else make_backend(cfg, self.builder)
        self.simulated = bool(getattr(self.backend, "simulated", False))
        if self.simulated:  # every line a user reads says where its numbers come from
            self.out = lambda msg, _out=out: _out(f"{msg} ({SIMULATED_LABEL})")
        self.ledger = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)
        # ideas (evo/ideas.py): the source-level ideas this campaign may build, shared with builder and proposer
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
        fp = config_fingerprint(self.cfg)
        if old is None:
            return
        for key in ("family", "geometries", "knobs"):
            if old.get(key) != fp[key]:
                raise CampaignError(
                    f"storage {self.cfg.storage} holds campaign {self.cfg.campaign!r} with different {key}; "
                    "rename the campaign or give another storage to start a new one"
                )
        old_backend = self.ledger.meta("backend")
        if old_backend and old_backend != self.backend.name and not self.replaying:
            raise CampaignError(
                f"campaign {self.cfg.campaign!r} was run on the {old_backend} backend and this machine uses "
                f"{self.backend.name}; rename the campaign or give another storage (--storage)"
            )

    def _load(self, built: Built | None, genome: Mapping[str, Any]):
        key = Genome(genome).key
        if key not in self._loaded:
            self._loaded[key] = self.backend.load(built, genome)
        return self._loaded[key]

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
            # create_meta: of several workers starting at once exactly one writes them (evo/workers.py).
            led.create_meta(
                {
                    "config": {
                        **config_fingerprint(self.cfg),
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
        """Measured once per campaign on the GPU (evo/ceiling.py); the recorded backend has none, and says so in the
        log. A failure is recorded with its reason: the floor is context, never a reason to stop."""
        if self.simulated or self.ledger.meta(ceiling_mod.FLOOR_META) is not None:
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
        led = self.ledger
        base_genome = self.family.baseline()
        built = self.builder.build(base_genome)
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
        a.output_hashes = _hashes_by_geometry(ev)
        a.error_vs_ref = _errors_by_geometry(ev)
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
        from evo.records import Timing
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
        # append_meta: under the study lock, so no other worker's session entry is lost (evo/workers.py)
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
            f"A/A noise floor: {msg}; a win needs > {threshold(p.min_gain, self.floor):.4f}x on every weighted geometry"
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
            parent_id=self.champion.id if self.champion else None,
            backend=self.backend.name,
            started_at=now(),
        )
        if built is not None:
            a.source_sha256, a.cubin_sha256, a.sass_sha256 = built.source_sha256, built.cubin_sha256, built.sass_sha256
            a.resources = {k: m.resources for k, m in built.modules.items()}
            a.compile_s = round(built.compile_s, 3)
        return a

    def evaluate(
        self, prop: Proposal, source: str | None = None, remeasure: bool = False, trial: Any = None
    ) -> Attempt:
        """Build and gate one proposal (the ledger records what comes back, whatever the verdict).

        ``trial``: one already asked for ``prop.genome`` (``evo worker`` reserves a genome when it proposes
        it); else it is asked here.
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
        if getattr(prop, "failure", None) is not None:
            a.verdict = prop.failure
            a.finished_at = now()
            self._stamp(a)
            self._record(trial, a, meta)
            return a
        from harness.worker import WorkerCrash, WorkerTimeout

        try:
            a = self._gate(a, prop, source, remeasure)
        except (WorkerCrash, WorkerTimeout) as e:  # only the worker died: record it and go on
            a.verdict = Verdict.error("crash" if isinstance(e, WorkerCrash) else "timeout", str(e))
            a.finished_at = now()
            self._stamp(a)
            self._record(trial, a, meta)
            if source is None:  # a source variant (fault, replayed patch) never took the genome's cached module
                self._loaded.pop(prop.genome.key, None)
            return a
        except Exception as e:  # a bug or a crash must not lose the attempt record
            from harness.gpu import KernelCrash

            a.verdict = Verdict.error(
                "crash" if isinstance(e, KernelCrash) else "harness",
                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            )
            a.finished_at = now()
            self._stamp(a)
            self._record(trial, a, meta)
            raise
        a.finished_at = now()
        self._stamp(a)
        self._record(trial, a, meta)
        if a.verdict.status == ACCEPTED:
            self.champion = a
        self._write_ideas(fresh)
        return a

    def _record(self, trial: Any, a: Attempt, meta: Mapping[str, Any] | None) -> None:
        """Every attempt evaluate() makes is recorded here (WorkerCampaign adds its elapsed_s to the transaction)."""
        self.ledger.record(trial, a, meta=meta)

    def _recorded(self) -> list[Attempt]:
        """The attempts _gate holds a new one against (identical SASS): read now (WorkerCampaign: its step's read)."""
        return self.ledger.attempts()

    def _stamp(self, a: Attempt) -> None:
        if self._cycle_t0 is not None:
            a.cycle_s = round(time.perf_counter() - self._cycle_t0, 3)

    # --- ideas (evo/ideas.py) ---------------------------------------------------
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

    def _gate(self, a: Attempt, prop: Proposal, source: str | None, remeasure: bool = False) -> Attempt:
        from harness.recorded import NotRecorded

        cfg = self.cfg
        try:
            built = self.builder.build(prop.genome, source)
        except IdeaError as e:  # ideas: unknown, no longer applies, or does not apply together with another
            a.verdict = Verdict.error("idea", str(e), gate="idea")
            return a
        except BuildError as e:
            a.verdict = Verdict.error("compile", str(e), gate="static")
            return a
        a.source_sha256, a.cubin_sha256, a.sass_sha256 = built.source_sha256, built.cubin_sha256, built.sass_sha256
        a.resources = {k: m.resources for k, m in built.modules.items()}
        a.compile_s = round(built.compile_s, 3)
        v = static_gate(
            a.resources, self._base_resources, cfg.gates.static.max_registers, cfg.gates.static.allow_new_spills
        )
        if not v.ok:
            a.verdict = v
            return a
        measured = {x.sass_sha256: x.id for x in self._recorded() if x.timings and x.sass_sha256 and x.id != a.id}
        v = identical_sass(a.sass_sha256, {} if remeasure else measured)  # a replay re-measures on purpose
        if not v.ok:
            a.verdict = v
            return a
        inexact = {
            g.name: self.family.inexact_knobs(prop.genome, g) + inexact_ideas(prop.genome, self.ideas)
            for g in cfg.geometries
        }
        c = cfg.gates.correctness
        if c.mode == "exact" and any(inexact.values()):
            a.verdict = correctness_gate(CorrectnessEvidence(), {}, "exact", inexact)
            return a
        if (source is not None or idea_slugs(prop.genome)) and self.simulated:
            a.verdict = Verdict.error(
                "not_recorded",
                "source-level variants (ideas, faults) need a GPU: the recorded sweep only holds knob genomes",
                gate="correctness",
            )
            return a
        t0 = time.perf_counter()
        try:
            # A source-level variant shares its genome with a plain one: never reuse a loaded module for it.
            loaded = self._load(built, prop.genome) if source is None else self.backend.load(built, prop.genome)
            ev = self.backend.correctness(loaded)
        except NotRecorded as e:
            a.verdict = Verdict.error("not_recorded", str(e), gate="correctness")
            return a
        a.output_hashes = _hashes_by_geometry(ev)
        a.error_vs_ref = _errors_by_geometry(ev)
        v = correctness_gate(
            ev, self.backend.baseline_hashes, c.mode, inexact, self.backend.baseline_errors, c.tolerance_factor
        )
        if not v.ok:
            a.verdict = v
            a.measure_s = round(time.perf_counter() - t0, 3)
            return a
        a.verdict = self._perf(a, loaded)
        a.measure_s = round(time.perf_counter() - t0, 3)
        if a.verdict.status == ACCEPTED:
            why = self.backend.recheck(loaded)
            if why:
                a.verdict = Verdict.rejected("correctness", f"after timing: {why}", Code.CORRECTNESS_RECHECK)
            else:
                a.verdict = self._sanitizer(a, source is not None)  # gates/sanitizer.py, before it is the champion
            if a.verdict.status == ACCEPTED:
                a.bound = self._bound(a)
                if a.bound is not None and self.cfg.e2e is not None:
                    self._e2e(a)
        return a

    def _sanitizer(self, a: Attempt, source_variant: bool) -> Verdict:
        """The sanitizer gate (issue 31): compute-sanitizer over a step that passed perf, judged against the family's
        suppressions (gates/sanitizer.py); the accepted verdict carries the result in ``detail["sanitizer"]``."""
        from evo.sanitize import gate_step

        res = gate_step(self.cfg, a, self.ideas, self.backend.name, self.simulated, source_variant, self.out)
        if not res.verdict.ok:
            return res.verdict
        return Verdict.accepted(a.verdict.reason, {**a.verdict.detail, "sanitizer": res.record})

    def _genome_file(self, a: Attempt) -> Any:
        from evo.e2e import write_genome_file

        return write_genome_file(self.cfg.log_dir / "e2e" / f"genome-{a.id}.json", {self.family.name: a.genome})

    def _e2e_frozen(self) -> dict[str, Any]:
        """The baseline's token stream hash and tokens/s, measured once per campaign."""
        from evo.e2e import run_e2e

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
        from evo.e2e import MEASUREMENT_ERROR, REJECTED, E2EError, compare_e2e, judge

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

    def _bound(self, a: Attempt) -> dict[str, Any] | None:
        """The share-derived decode bound of an accepted step (kept either way; it says whether to claim)."""
        b = self.cfg.bound
        if b is None:
            return None
        from evo.profile import load_profile
        from gates.bound import bound_gate

        prof = load_profile(b.profile)
        floor = b.noise_floor if b.noise_floor is not None else prof.decode_noise_floor
        champ = self.champion or self.baseline
        prev = champ.speedup_vs_baseline.get(b.geometry) if champ else None
        k = a.speedup_vs_parent[b.geometry].value
        v = bound_gate(prof.share(b.kernel), prev.value if prev else 1.0, k, floor)
        return {
            **v.to_dict(),
            "geometry": b.geometry,
            "profile": str(b.profile),
            "decode_floor": floor,
            "observed": None,
        }

    def _perf(self, a: Attempt, loaded) -> Verdict:
        p = self.cfg.gates.perf
        champ = self.champion or self.baseline
        assert champ is not None and self.baseline is not None
        champ_loaded = self._load(None, champ.genome) if champ.genome_key in self._loaded else None
        if champ_loaded is None:
            champ_loaded = self._load(None if self.simulated else self.builder.build(champ.genome), champ.genome)
        base_loaded = self._loaded[self.baseline.genome_key]
        parts = [("cand", loaded), ("champ", champ_loaded)]
        keys = [a.genome_key, champ.genome_key]
        if champ.id != self.baseline.id:
            parts.append(("base", base_loaded))
            keys.append(self.baseline.genome_key)
        samples = []
        devinfo: dict[str, Any] = {}
        stop = EarlyStop(p.early_rounds) if p.early_rounds else None
        stopping = stop.describe(p.rounds) if stop else f"fixed {p.rounds} rounds"
        early_at = None
        # Weighted geometries first: a clear loser there ends the attempt before the watched ones cost time.
        for g in sorted(self.cfg.geometries, key=lambda g: g.weight <= 0):
            # watched geometries only must not regress beyond noise, which "slower in every pair" does not show
            s = self.backend.measure(
                parts, g, p.rounds, self.part_launches(parts, keys, g), stop=stop if g.weight > 0 else None
            )
            method = (
                f"batch: {s.batch_text()}; pairs: {len(s.times_us['cand'])} interleaved "
                f"({'cand/champ/base' if len(parts) == 3 else 'cand/champ'}, rotating order); "
                f"noise floor: {self.floors.get(g.name, 0):.3%}; stopping: {stopping}"
                f"{' (stopped early)' if s.stopped_early else ''}; throttled rounds dropped: {s.discarded}"
                + self._launches_note(parts, g)
            )
            if self.simulated:
                method += f"; {SIMULATED_LABEL}"
            samples.append(
                PairSamples(
                    g.name,
                    g.weight,
                    s.times_us["cand"],
                    s.times_us["champ"],
                    s.times_us.get("base"),
                    s.discarded,
                    self.family.bytes_moved(g),
                    method,
                )
            )
            for k, v in s.clocks.items():
                if isinstance(v, (int, float)) and k.startswith("sm_mhz"):
                    f = min if k.endswith("min") else max
                    devinfo[k] = f(devinfo.get(k, v), v)
                elif k == "throttled_samples":
                    devinfo[k] = devinfo.get(k, 0) + v
                else:
                    devinfo[k] = v
            if s.stopped_early:
                early_at = g.name
                break
        res = perf_gate(
            samples,
            self.floor,
            p.min_gain,
            p.confidence,
            p.rule,
            self.ceiling.get("ceiling_tbps"),
            p.watched_slack,
            p.watched,  # issue 31: watched geometries against the baseline by default
        )
        if early_at is not None and res.verdict.code is not Code.PERF_PHYSICS:  # physics says more: keep it
            iv = res.vs_parent[early_at]
            res.verdict = Verdict.rejected(
                "perf",
                f"slower than the champion at {early_at} in all of the first {stop.after} pairs "
                f"({iv.fmt()}); stopped early, geometries after it not measured",
                Code.PERF_EARLY_STOP,
                {"geometry": early_at, "after": stop.after},
            )
        a.timings, a.roofline_pct, a.score = res.timings, res.roofline_pct, res.score
        a.speedup_vs_parent = res.vs_parent
        a.speedup_vs_baseline = res.vs_baseline
        a.parent_id = champ.id
        a.device = devinfo
        return res.verdict

    def ceiling_check(self) -> dict[str, Any] | None:
        """The champion against the copy ceiling, measured alternately (evo/ceiling.py), appended to the ledger's
        ``ceiling_checks``. Called at the end of a run; a failure is recorded with its reason and loses nothing."""
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
        """Compile processes ahead of the GPU (evo/prefetch.py), or None (worker.prefetch 0 / auto off-GPU)."""
        n = self.cfg.worker.prefetch
        if n < 0:
            n = 0 if self.simulated else 1
        if n == 0 or self.cfg.path is None:
            return None
        from evo.prefetch import Prefetcher

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

    def budget_spent(self, attempts: list[Attempt], elapsed: float) -> tuple[list[Attempt], str | None]:
        """The attempts that count against the budget, and why the budget is spent (None while it is not)."""
        budget = self.cfg.budget
        counted = [x for x in attempts if x.verdict.kind != "interrupted"]
        if budget.attempts is not None and len(counted) >= budget.attempts:
            return counted, f"attempt budget reached ({len(counted)}/{budget.attempts})"
        if budget.minutes is not None and elapsed >= budget.minutes * 60:
            return counted, f"time budget reached ({elapsed / 60:.1f}/{budget.minutes:g} min)"
        return counted, None

    SESSION_MODE = "run"  # one live evo run per campaign (Ledger.claim); WorkerCampaign: "worker"

    def claim(self) -> None:
        """Register this process as the campaign's runner, or CampaignError naming the one that runs it."""
        if self.ledger._session_key is None:
            self._preflight()  # a refused resume leaves the ledger as it was, session row included
        try:
            self.ledger.claim(self.SESSION_MODE)
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

    def _run(self) -> RunSummary:
        t_start = time.monotonic()  # budget.minutes counts the set-up (A/A, baseline) too
        self.setup()
        cfg = self.cfg
        led = self.ledger
        start_elapsed = float(led.meta("elapsed_s") or 0.0)
        new = 0
        stopped = "budget"
        proposer_cls = PROPOSERS[cfg.proposer.name]
        n_before = len(led.attempts())
        # Seed differs per session so a resumed campaign does not replay the same random stream.
        proposer = proposer_cls(
            self.family, cfg.geometries, cfg.proposer.options, cfg.seed * 7919 + n_before, tabu=self.tabu()
        )
        # ideas: idea toggles, the knob search in the champion's idea context, the outside proposer
        from evo.proposers.outside import IdeaLayer

        proposer = IdeaLayer(
            proposer,
            self.family,
            cfg.geometries,
            self.ideas,
            cfg.ideas,
            cfg.seed * 7919 + n_before,
            self.builder.source_for,
            self.out,
        )
        if self.on_attempt and self.baseline is not None:
            self.on_attempt(self.baseline, self)
        prefetch = self._prefetcher()
        pending: Proposal | None = None  # proposed one step ahead while the GPU measured (worker.prefetch)
        try:
            while True:
                stop.check()  # the safe point of the loop: between attempts
                self._cycle_t0 = time.perf_counter()
                attempts = led.attempts()
                counted, spent = self.budget_spent(attempts, start_elapsed + time.monotonic() - t_start)
                if spent:
                    stopped = spent
                    break
                proposer.tabu = {k: set(v) for k, v in self.tabu().items()}
                seen = led.seen_keys()
                prop = pending if pending is not None and pending.genome.key not in seen else None
                prop = prop or proposer.propose(attempts, seen)
                pending = None
                if prop is None:
                    stopped = "search space exhausted (every valid genome was tried)"
                    break
                if prefetch is not None:
                    pending = self._compile_ahead(
                        prefetch, prop, functools.partial(proposer.propose, attempts, seen | {prop.genome.key})
                    )
                a = self.evaluate(prop)
                new += 1
                # Kept current so a killed session's time still counts against budget.minutes.
                led.set_meta("elapsed_s", start_elapsed + time.monotonic() - t_start)
                if self.on_attempt:
                    self.on_attempt(a, self)
        except KeyboardInterrupt:
            stopped = "interrupted by the user"
        finally:
            self._cycle_t0 = None
            if prefetch is not None:
                prefetch.close()
            led.set_meta("elapsed_s", start_elapsed + time.monotonic() - t_start)
        if stopped != "interrupted by the user":
            self.ceiling_check()
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


def _hashes_by_geometry(ev) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for c in ev.checks:
        out.setdefault(c.geometry, {})[f"{c.seed}/{c.output}"] = c.hashes[0] if c.hashes else ""
    return out


def _errors_by_geometry(ev) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for c in ev.checks:
        d = out.setdefault(c.geometry, {})
        if c.rel_err is not None:
            d[f"{c.output}.rel_err"] = max(d.get(f"{c.output}.rel_err", 0.0), c.rel_err)
        if c.max_abs is not None:
            d[f"{c.output}.max_abs"] = max(d.get(f"{c.output}.max_abs", 0.0), c.max_abs)
    return out


def _nvrtc_version() -> str:
    try:
        from harness.build import nvrtc_version

        return nvrtc_version()
    except Exception as e:
        return f"unavailable ({e})"
