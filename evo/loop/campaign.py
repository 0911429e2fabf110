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

This module keeps the loop and nothing else: the seams are made in seams.py, the references (baseline, A/A noise
floor, copy ceiling) measured in baseline.py, the loaded modules kept in modules.py, the sanitizer, end-to-end and
ceiling checks in checks.py, the ideas against the ledger in campaign_ideas.py, the printed lines in report_lines.py.
"""

from __future__ import annotations

import sys
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError

from evo import stop
from evo.config import CampaignConfig
from evo.core import hooks
from evo.core.protocols import AskedTrial, Backend, Gate, Storage, StorageView
from evo.core.records import ACCEPTED, Attempt, Verdict, simulated_label
from evo.core.variant import launch_digest
from evo.ledger.ledger import BudgetTaken, GenomeTaken, worker_name
from evo.loop import campaign_ideas, checks, peers, report_lines, seams
from evo.loop.attempt import new_attempt, now
from evo.loop.baseline import BaselineSetup
from evo.loop.budget import budget_spent, exact_mode_tabu, spent_at_resume
from evo.loop.errors import CampaignError
from evo.loop.finish import run_finish_if_due
from evo.loop.modules import LoadedModules
from evo.loop.prefetch import compile_ahead, prefetcher_for
from evo.loop.shared import Reserved, others_hold_the_rest, recover_dead, reserve, wait
from evo.search import Proposal
from evo.search.ideas import idea_hook, idea_slugs, inexact_ideas
from gates.judge import JudgeContext, judge, pipeline
from gates.registry import GateError
from harness.build import Builder, Built
from harness.errors import HarnessError

# CampaignError and now: also imported from here (the CLI, replay, selfcheck, tests)
__all__ = ["Campaign", "CampaignError", "RunSummary", "now"]

WAIT, AGAIN = "wait", "again"  # a step's outcome other than a proposal: wait for the others; read the ledger again


@dataclass
class RunSummary:
    attempts: int
    new_attempts: int
    stopped: str
    champion: Attempt | None
    log_path: str | None = None


@dataclass
class LoopState:
    """What the loop carries from one step to the next (``Campaign._run``)."""

    proposer: Any
    elapsed: Callable[[], float]  # the campaign's elapsed seconds now (the time budget)
    prefetch: Any = None  # evo/loop/prefetch.py's Prefetcher, or None
    new: int = 0  # attempts this run recorded
    # (proposal, its trial: None until evaluate asks it, except on a shared storage) proposed one step ahead and
    # compiled while the GPU measured (worker.prefetch)
    pending: Reserved | None = None
    last_check: float = field(default_factory=time.monotonic)  # the last look for dead workers


class Campaign:
    """One campaign: set-up, then the loop (``run``) of propose, reserve, judge with the gates, record.

    Its seams (evo/core/protocols.py) default to the config's: ``backend`` (evo/backends.py's registry), ``builder``
    (NVRTC), ``storage`` (the config's ledger), ``gates`` (``gates.judge.pipeline()``), ``proposer`` (the
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
        self.cfg = self.config_as_given = cfg
        self.family = cfg.family
        self.on_attempt = on_attempt
        self.command = command or " ".join(sys.argv)
        self.replaying = replaying  # replay may re-judge a ledger made on another backend
        self.builder = builder if builder is not None else Builder.for_config(cfg)
        self.backend = backend if backend is not None else seams.make_backend(cfg, self.builder)
        self.simulated = bool(getattr(self.backend, "simulated", False))
        self.label = simulated_label(self.backend)  # where a simulated run's numbers come from (its device)
        # every line a user reads says where its numbers come from
        self.out: Callable[[str], None] = report_lines.labelled(out, self.label) if self.simulated else out
        cfg, self.narrowed = seams.narrow(cfg, self.backend)
        if self.narrowed:
            self.cfg, self.family = cfg, cfg.family
            self.out(f"{self.backend.name} backend: searching the knob values it measured ({'; '.join(self.narrowed)})")
        try:  # (an evo.gates plug-in that fails to import is the user's one-line error)
            self.gates: list[Gate] = list(pipeline() if gates is None else gates)
        except GateError as e:
            raise CampaignError(str(e)) from None
        self.proposer = proposer
        self.stop_when = stop_when
        self.use_tabu = tabu
        self.ledger: Storage = storage if storage is not None else seams.open_storage(self.cfg, self.SHARED)
        self.name = worker_name()  # names this process in messages (and, shared, in each attempt's device)
        self.taken = 0  # proposals another worker reserved first (shared storage)
        self._view: StorageView | None = None  # the ledger as the loop's current step read it
        self._elapsed: Callable[[], float] | None = None  # the loop: the campaign's elapsed seconds now
        # ideas (evo/search/ideas.py): the source-level ideas this campaign may build, shared with builder and proposer
        self.ideas, self._ideas_changed = campaign_ideas.read_ideas(self.cfg, self.ledger)
        self.builder.source_hook = idea_hook(self.ideas)
        self.modules = LoadedModules(self.backend, self.builder, self.simulated)
        self.floor, self.floors, self.ceiling = 0.0, dict[str, float](), dict[str, float]()
        self.baseline: Attempt | None = None
        self.champion: Attempt | None = None
        self._base_resources: dict[str, Any] = {}
        self.launches: dict[str, int] = {}  # geometry -> the baseline's launches a graph (A/A)
        self._cycle_t0: float | None = None  # set by run(): an attempt's cycle_s counts from its proposal

    # --- setup ------------------------------------------------------------
    def _load(self, built: Built | None, genome: Mapping[str, Any]) -> Any:
        """The genome's loaded module, cached (evo/loop/modules.py); ablate and selfcheck measure through it."""
        return self.modules.load(built, genome)

    def part_launches(self, parts: Sequence[tuple[str, Any]], keys: Sequence[str], g: Any) -> dict[str, int]:
        """Label -> launches a graph, each part's for itself (evo/loop/modules.py)."""
        return self.modules.part_launches(parts, keys, g)

    def judge_context(self) -> JudgeContext:
        """What the gates may read of this campaign now (gates/judge.py); made for every attempt, as the champion
        changes. The campaign's capabilities go in as narrow callables, never the campaign itself."""
        from evo.measure.profile import load_profile

        cfg = self.cfg
        return JudgeContext(
            family=self.family,
            builder=self.builder,
            backend=self.backend,
            config=cfg,
            ideas=self.ideas,
            simulated=self.simulated,
            baseline=self.baseline,
            champion=self.champion,
            base_resources=self._base_resources,
            floor=self.floor,
            floors=self.floors,
            ceiling=self.ceiling,
            load=self.modules.load,
            load_genome=self.modules.load_genome,
            launch_sha256=self.launch_sha256,
            part_launches=self.modules.part_launches,
            launches_note=lambda parts, g: report_lines.launches_note(cfg.gates.perf.launch, self.family, parts),
            inexact_ideas=lambda genome: inexact_ideas(genome, self.ideas),
            uses_ideas=lambda genome: bool(idea_slugs(genome)),
            sanitize=lambda a, variant: checks.sanitize_step(
                cfg, a, variant, self.ideas, self.backend.name, self.simulated, self.out, self.label
            ),
            e2e=lambda a: checks.e2e_step(cfg, self.ledger, self.champion, self.baseline, a),
            load_profile=load_profile,
        )

    def _check_resume(self) -> None:
        seams.check_resume(self.ledger, self.config_as_given, self.backend.name, self.replaying)

    def _preflight(self) -> None:
        """What refuses a resume, checked before anything is written (evo/loop/seams.py)."""
        seams.preflight(self.ledger, self.config_as_given, self.backend.name, self.replaying, self._ideas_changed)

    def setup(self) -> None:
        """Meta, A/A and the baseline (evo/loop/baseline.py); a stop request is honoured between its steps."""
        self._preflight()
        stop.check()
        led = self.ledger
        seams.open_campaign(
            led,
            lambda: seams.campaign_meta(
                self.config_as_given, self.cfg, self.narrowed, self.command, self.backend.name, self.simulated
            ),
            self.out,
        )
        refs = BaselineSetup(self.cfg, led, self.modules, self.out, self.name)
        r = refs.measure(self.replaying, self._check_resume, self._attempt)
        self.baseline, self._base_resources, self.launches = r.baseline, r.base_resources, r.launches
        self.floors, self.floor, self.ceiling = r.floors, r.floor, r.ceiling
        stop.check()
        self.champion = led.champion() or self.baseline
        if self.cfg.ideas is not None:  # ideas: freeze the folder's ideas into the ledger (new ones are accepted)
            campaign_ideas.freeze_ideas(led, self.ideas)
        refs.peer_timing()

    # --- one attempt --------------------------------------------------------
    def _attempt(self, number: int, prop: Proposal, built: Built | None) -> Attempt:
        hooks.in_flight(number if self._view is not None else None)  # the loop's: a crash judging it, its verdict
        return new_attempt(number, prop, built, self.cfg, self.backend.name, self.champion, self.launch_sha256)

    def launch_sha256(self, genome: Any) -> str:
        """The genome's launch digest at the campaign's geometries (evo/core/variant.py), with PDL where the campaign
        launches so; asked after each build. Raises LaunchError."""
        return launch_digest(self.family, genome, self.cfg.geometries, self.cfg.gates.perf.launch == "pdl")

    def evaluate(
        self, prop: Proposal, source: str | None = None, remeasure: bool = False, trial: AskedTrial | None = None
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
        meta = campaign_ideas.ideas_meta(self.ledger, self.ideas, prop.genome)
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
            if e.kind == "crash":  # as `evo run`'s watching parent says a crash of the campaign's own process
                sys.stderr.write(f"evo: attempt #{a.id}: {e.reason()}: recorded as error: crash; the run goes on\n")
            if e.fatal:  # the device state is lost with it: nothing more can be measured in this process
                raise
            if source is None:  # (a source variant never took the genome's cached module) a dead worker's is gone
                self.modules.forget(prop.genome.key)
            return a
        except Exception as e:  # a bug must not lose the attempt record
            a.verdict = Verdict.error("harness", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            self._finish(trial, a, meta)
            raise
        self._finish(trial, a, meta)
        if a.verdict.status == ACCEPTED:
            self.champion = a
        campaign_ideas.write_ideas(self.cfg.log_dir, fresh, self.out)
        return a

    def _finish(self, trial: AskedTrial, a: Attempt, meta: Mapping[str, Any] | None) -> None:
        """Every attempt evaluate() makes is recorded here; in the loop the campaign's elapsed_s rides with it (one
        write, and with several workers the largest of their values stays)."""
        a.finished_at = now()
        if self._cycle_t0 is not None:
            a.cycle_s = round(time.perf_counter() - self._cycle_t0, 3)
        most = None if self._elapsed is None else {"elapsed_s": self._elapsed()}
        self.ledger.record(trial, a, meta=meta, meta_max=most)
        hooks.in_flight(None)  # (evo/run_child.py: a crash from here on is outside an attempt)

    def _recorded(self) -> list[Attempt]:
        """The attempts a new one is held against (identical SASS): the loop's step read them; else read now."""
        return self._view.attempts if self._view is not None else self.ledger.attempts()

    def ceiling_check(self) -> dict[str, Any] | None:
        """The champion against the copy ceiling (evo/loop/checks.py), at the end of a run."""
        return checks.ceiling_check(self.cfg, self.ledger, self.modules, self.champion or self.baseline, self.out)

    # --- the loop -------------------------------------------------------------
    def _prefetcher(self) -> Any:
        """Compile processes ahead of the GPU (evo/loop/prefetch.py), or None; a test replaces it."""
        return prefetcher_for(self.cfg, self.simulated, self.builder.arch)

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
        """A lone run's resume of a campaign whose budget was already spent (evo/loop/budget.py): the summary of what
        is recorded, with nothing measured; None where there is work to do, or for workers, replays, stop_when."""
        led = self.ledger
        spent = None if self.replaying or self.stop_when is not None else spent_at_resume(led, self.cfg.budget, elapsed)
        if spent is None:
            return None
        self.out(f"resume: {spent} before this run; nothing measured (raise the budget to go on)")
        self.champion = led.champion()
        return RunSummary(len(led.attempts()), 0, spent, self.champion)

    def claim(self) -> None:
        """Register this process as the campaign's runner, or CampaignError naming the one that runs it."""
        if not self.ledger.claimed:
            self._preflight()  # a refused resume leaves the ledger as it was, session row included
        seams.claim_session(self.ledger, self.SESSION_MODE, self.cfg)

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
        """The config's proposer in the idea layer (evo/loop/seams.py), seeded for this session."""
        seed = self.proposer_seed(n_before)
        return seams.make_proposer(self.cfg, self.ideas, seed, self.tabu(), self.builder.source_for, self.out)

    def _reserve(self, proposer: Any, attempts: list[Attempt], seen: set[str]) -> tuple[Proposal, Any] | None:
        """Propose a genome and, on a shared storage, reserve it (evo/loop/shared.py); None when nothing is left."""
        return reserve(self.ledger, proposer, attempts, seen, lambda: setattr(self, "taken", self.taken + 1))

    def _run(self) -> RunSummary:
        """The campaign loop (``evo run``, ``evo worker``, the search benchmark): set-up, then propose, judge and
        record until the budget is spent, the space exhausted, ``stop_when`` says so, or a stop is asked for."""
        t_start = time.monotonic()  # budget.minutes counts the set-up (A/A, baseline) too
        led = self.ledger
        start_elapsed = float(led.meta("elapsed_s") or 0.0)
        elapsed = self._elapsed = lambda: start_elapsed + time.monotonic() - t_start
        led.elapsed_fn = elapsed  # the session heartbeat keeps elapsed_s current between attempts, set-up too
        done = self._spent_before_start(start_elapsed)
        if done is not None:
            return done
        self.setup()
        proposer = self.proposer if self.proposer is not None else self.make_proposer(len(led.attempts()))
        st = LoopState(proposer, elapsed)
        if self.on_attempt and self.baseline is not None:
            self.on_attempt(self.baseline, self)
        st.prefetch = self._prefetcher()
        stopped = "budget"
        try:
            stopped = self._steps(st)
        except KeyboardInterrupt:  # reserved trials are left RUNNING: recover() records them as interrupted
            stopped = "interrupted by the user"
        finally:
            self._cycle_t0 = self._view = self._elapsed = led.elapsed_fn = None
            if st.prefetch is not None:
                st.prefetch.close()
            if not led.shared:  # (workers: elapsed_s rides with each attempt; a final write could lower another's)
                led.set_meta("elapsed_s", elapsed())
        self.champion = led.champion() or self.baseline
        if stopped != "interrupted by the user":
            self.ceiling_check()  # (each worker its own, on its GPU: each appends one)
            peers.time_peers(self.cfg, self.ledger, self.modules, self.champion, self.out)  # (evo/loop/peers.py)
        return RunSummary(len(led.attempts()), st.new, stopped, self.champion)

    def _steps(self, st: LoopState) -> str:
        """The loop's steps: read the ledger once, check the budget and ``stop_when``, propose (and reserve), compile
        the next proposal ahead, judge, record. Returns why it stopped."""
        led = self.ledger
        while True:
            stop.check()  # the safe point of the loop: between attempts
            self._cycle_t0 = time.perf_counter()
            st.last_check = recover_dead(led, st.last_check, self.name, self.out)
            view = self._view = led.view()
            counted, spent = budget_spent(self.cfg.budget, view.attempts, st.elapsed())
            spent = spent or (self.stop_when(view.attempts) if self.stop_when is not None else None)
            if spent:
                self._measure_reserved(st)
                return spent
            if (ran := run_finish_if_due(self, view)) is not None:  # near-champions head to head when due
                st.new += ran
                continue
            if others_hold_the_rest(led, self.cfg.budget, counted, view, st.pending):
                wait()
                continue
            if self.use_tabu:
                st.proposer.tabu = {k: set(v) for k, v in self.tabu(view.attempts).items()}
            got = self._next_proposal(st, view)
            if got == WAIT:
                wait()
                continue
            if got == AGAIN:
                continue
            if got is None:
                stopped = "search space exhausted (every valid genome was tried)"
                if (ran := run_finish_if_due(self, view, ending=stopped)) is None:  # (evo/loop/finish.py)
                    return stopped
                st.new += ran
                continue
            assert isinstance(got, tuple)
            prop, trial = got
            if st.prefetch is not None:
                reserve_next = self._reserve_next(st.proposer, prop, view)
                st.pending = compile_ahead(st.prefetch, prop, reserve_next, genome_of=lambda p: p[0].genome)
            self._measure(st, prop, trial)

    def _next_proposal(self, st: LoopState, view: StorageView) -> Reserved | str | None:
        """The step's proposal and its trial: the one proposed ahead, else a new one; WAIT (the others hold the rest
        for now), AGAIN (read the ledger again) or None (the space is exhausted)."""
        got, st.pending = st.pending, None
        if got is not None and got[1] is None and got[0].genome.key in view.seen:
            got = None  # (not reserved, and judged meanwhile)
        if got is not None:
            return got
        try:
            got = self._reserve(st.proposer, view.attempts, view.seen)
        except GenomeTaken:  # taken RESERVE_TRIES times in a row: read what the others hold
            return AGAIN
        except BudgetTaken:
            return WAIT
        if got is None and view.running and self.ledger.shared:  # a running attempt may yet be interrupted and freed
            return WAIT
        return got

    def _reserve_next(self, proposer: Any, prop: Proposal, view: StorageView) -> Callable[[], Reserved | None]:
        """The proposal after ``prop``, to be compiled ahead (None where another worker holds what is proposed)."""

        def reserve_next() -> Reserved | None:
            try:
                return self._reserve(proposer, view.attempts, view.seen | {prop.genome.key})
            except (GenomeTaken, BudgetTaken):  # the next step proposes in-line
                return None

        return reserve_next

    def _measure_reserved(self, st: LoopState) -> None:
        """At the budget's end: a proposal reserved and compiled ahead is measured, not left RUNNING (one attempt over
        a time budget; the attempt budget had room for it when it was asked)."""
        if st.pending is not None and st.pending[1] is not None:
            prop, trial = st.pending
            st.pending = None
            if st.prefetch is not None:
                st.prefetch.wait(prop.genome)
            self._measure(st, prop, trial)

    def _measure(self, st: LoopState, prop: Proposal, trial: AskedTrial | None) -> None:
        """Judge and record one proposal against the ledger's champion as this step read it (on a shared storage
        another worker may have accepted a step since this one's last attempt)."""
        self.champion = (self._view.champion() if self._view is not None else None) or self.baseline
        try:
            a = self.evaluate(prop, trial=trial)
        except UpdateFinishedTrialError as e:  # we were taken for dead (no heartbeat for the grace period)
            self.out(report_lines.dropped_line(self.name, e))
            return
        st.new += 1
        if self.on_attempt:
            self.on_attempt(a, self)
