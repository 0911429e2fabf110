"""Several workers on one campaign: ``evo worker <config> [--storage URL]``.

Each worker is one process (one per GPU: give each its own
``CUDA_VISIBLE_DEVICES``; or one per host) that joins the campaign named in the
config through its storage URL, typically PostgreSQL
(``postgresql+psycopg2://user:pw@host/db``; ``pip install -e '.[pg]'``), and
runs the campaign loop against the shared ledger. The ledger does the
coordination (evo/ledger.py, "Shared mode" and "Liveness"):

* no attempt measured twice: ``ask`` refuses, in the transaction that would
  create the trial and under the study lock, a genome that a RUNNING or
  recorded non-interrupted trial already holds (:class:`GenomeTaken`);
* reservation at proposal: a worker asks each genome (its trial RUNNING,
  holding the genome) as soon as it is proposed, before it is compiled ahead
  or measured, and so does it for the proposal it compiles ahead. Another
  worker's proposer, which sees RUNNING trials as taken, then proposes
  something else, and no compile ahead is spent on a genome another worker
  measures. Workers reading the same attempts propose the same genome (the
  proposers are deterministic on them), so the one that asks second is
  refused: it counts the refusal (``taken``) and proposes again at once
  without that genome. A reserved trial is always measured: when the budget
  ends with one compiled ahead, it is measured too (one attempt over the time
  budget; the attempt budget had room for it when it was asked); only a
  stopped process (Ctrl-C, a kill) leaves it RUNNING, for ``recover`` to record
  as ``error: interrupted``;
* none lost: every trial is recorded by its worker, or recovered as
  ``error: interrupted`` once its worker is dead (same host: at once; other
  hosts: no heartbeat for the grace period), by whoever starts next or by the
  periodic check every worker makes between attempts;
* the budget is global: ``ask`` also refuses (:class:`BudgetTaken`) when
  RUNNING plus recorded non-interrupted trials fill ``budget.attempts``, and a
  worker waits while other workers' attempts could still fill it or be
  interrupted;
* the campaign meta is created by the first worker (``create_meta``) and the
  baseline exactly once: a worker whose baseline ask is refused waits for the
  holder to record it (or to be recovered as interrupted, then tries again),
  then checks its own frozen output hashes against it;
* the champion is read from the ledger at each step (another worker may have
  accepted a step).

Each step reads the trials once (``Ledger.view``: attempts, seen genomes,
running trials) and writes the campaign's ``elapsed_s`` in the transaction that
records the attempt: with several processes on one database each read or
write is also a chance to wait on another's.

Each attempt's ``device["worker"]`` says which worker ("<host> pid <pid>")
measured it. ``budget.minutes`` is per worker session (plus the campaign's
recorded ``elapsed_s`` at its start).

As in ``evo run``, the next proposal is compiled in a separate process
while the current one is measured (``worker.prefetch``). Not done yet: an attempt accepted
against a champion that another worker replaced meanwhile is kept as
accepted vs its parent (its ``parent_id`` says which).
"""

from __future__ import annotations

import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

from optuna.exceptions import StorageInternalError, UpdateFinishedTrialError
from sqlalchemy.exc import SQLAlchemyError

from evo import stop
from evo.campaign import Campaign, CampaignError, RunSummary
from evo.ledger import BudgetTaken, GenomeTaken, View, worker_name
from evo.proposers import PROPOSERS, Proposal
from evo.records import BASELINE, Attempt

POLL_S = 0.2  # how often a waiting worker looks at the ledger again
# proposals in a row another worker reserved first before the step reads the ledger again (its running trials
# then tell the proposer what the others hold)
RESERVE_TRIES = 8


class WorkerCampaign(Campaign):
    """A campaign loop that shares its ledger with other workers."""

    def __init__(self, cfg: Any, **kw: Any):
        super().__init__(cfg, **kw)
        self.ledger.shared = True
        self.ledger.limit = cfg.budget.attempts
        self.name = worker_name()
        self.taken = 0  # proposals another worker got first
        self._view: View | None = None  # the ledger as run()'s current step read it
        # run(): the campaign's elapsed seconds now, recorded with each attempt
        self._elapsed: Callable[[], float] | None = None

    # --- set-up ------------------------------------------------------------
    def _baseline(self) -> None:
        # Another worker may have created the campaign since our first check: hold this config against it.
        self._check_resume()
        super()._baseline()

    def _record_baseline(self) -> None:
        """Exactly one worker records the baseline; the others wait for it and check their hashes against it."""
        pending = self._pending_baseline
        while pending is not None:
            self._pending_baseline = pending
            try:
                super()._record_baseline()
                return
            except GenomeTaken as e:
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

    # --- one attempt -----------------------------------------------------------
    def evaluate(self, prop: Any, source: str | None = None, remeasure: bool = False, trial: Any = None) -> Attempt:
        # Another worker may have accepted a step since: measure against the ledger's champion (run() read it
        # with its step's view; other callers read it now).
        view = self._view
        self.champion = (view.champion() if view is not None else self.ledger.champion()) or self.baseline
        return super().evaluate(prop, source, remeasure, trial)

    def _record(self, trial: Any, a: Attempt, meta: Any) -> None:
        if self._elapsed is None:
            return super()._record(trial, a, meta)
        # elapsed_s rides with the attempt (no transaction of its own); the largest of all workers' stays
        self.ledger.record(trial, a, meta=meta, meta_max={"elapsed_s": self._elapsed()})

    def _recorded(self) -> list[Attempt]:
        return self._view.attempts if self._view is not None else super()._recorded()

    # --- the loop -------------------------------------------------------------
    def _proposer(self, n_before: int) -> Any:
        """As in Campaign.run, seeded per worker so that workers do not all propose the same genomes."""
        cfg = self.cfg
        seed = cfg.seed * 7919 + n_before + zlib.crc32(self.name.encode()) % 1_000_003
        proposer = PROPOSERS[cfg.proposer.name](
            self.family, cfg.geometries, cfg.proposer.options, seed, tabu=self.tabu()
        )
        from evo.proposers.outside import IdeaLayer

        return IdeaLayer(
            proposer, self.family, cfg.geometries, self.ideas, cfg.ideas, seed, self.builder.source_for, self.out
        )

    def _recover(self) -> None:
        lost = self.ledger.recover()
        if lost:
            self.out(
                f"worker {self.name}: {len(lost)} attempt(s) of a stopped worker recorded as interrupted "
                f"({', '.join(f'#{n}' for n in lost)})"
            )

    def _reserve(self, proposer: Any, attempts: list[Attempt], seen: set[str]) -> tuple[Proposal, Any] | None:
        """Propose a genome and reserve it at once: (proposal, its RUNNING trial), or None when nothing is left.

        Called by run() for the proposal to measure now and for the one compiled ahead. A genome another
        worker reserved first is counted in ``taken`` and left out of the next proposal, made at once; after
        RESERVE_TRIES of them GenomeTaken passes on, as does BudgetTaken.
        """
        seen = set(seen)
        for n in range(RESERVE_TRIES):
            prop = proposer.propose(attempts, seen)
            if prop is None:
                return None
            try:
                return prop, self.ledger.ask(fixed=prop.genome)
            except GenomeTaken as e:
                self.taken += 1
                seen.add(e.genome_key)
                if n == RESERVE_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    SESSION_MODE = "worker"

    def _run(self) -> RunSummary:
        t_start = time.monotonic()  # budget.minutes counts the set-up (A/A, baseline) too
        self.setup()
        led, budget = self.ledger, self.cfg.budget
        start_elapsed = float(led.meta("elapsed_s") or 0.0)
        self._elapsed = lambda: start_elapsed + time.monotonic() - t_start
        proposer = self._proposer(len(led.attempts()))
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
        # (proposal, its reserved trial) proposed one step ahead and compiled while the GPU measured (worker.prefetch)
        pending: tuple[Proposal, Any] | None = None
        try:
            while True:
                stop.check()  # between attempts
                self._cycle_t0 = time.perf_counter()
                if time.monotonic() - last_check >= led.heartbeat_s:  # the periodic check for dead workers
                    self._recover()
                    last_check = time.monotonic()
                view = self._view = led.view()
                counted, spent = self.budget_spent(view.attempts, self._elapsed())
                if spent:
                    stopped = spent
                    if pending is not None:  # compiled and reserved: measured, not left RUNNING
                        prop, trial = pending
                        pending = None
                        if prefetch is not None:
                            prefetch.wait(prop.genome)
                        measure(prop, trial)
                    break
                full = budget.attempts is not None and len(counted) + len(view.running) >= budget.attempts
                if full and pending is None:  # (a pending trial of ours is running and within the budget)
                    wait()  # the rest of the budget is being measured; one may still be interrupted
                    continue
                proposer.tabu = {k: set(v) for k, v in self.tabu(view.attempts).items()}
                if pending is not None:
                    (prop, trial), pending = pending, None
                else:
                    try:
                        got = self._reserve(proposer, view.attempts, view.seen)
                    except GenomeTaken:  # taken RESERVE_TRIES times in a row: read what the others hold
                        continue
                    except BudgetTaken:
                        wait()
                        continue
                    if got is None:
                        if view.running:  # a running attempt may yet be interrupted and its genome freed
                            wait()
                            continue
                        stopped = "search space exhausted (every valid genome was tried)"
                        break
                    prop, trial = got
                if prefetch is not None:
                    # the next proposal reserved before its compile is submitted; none ahead when it cannot be
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
            if prefetch is not None:
                prefetch.close()
        self.champion = led.champion() or self.baseline
        if stopped != "interrupted by the user":
            self.ceiling_check()  # this worker's own, on its GPU: each worker appends one
        return RunSummary(len(led.attempts()), new, stopped, self.champion)


def cli_worker(cfg: Any, args: Any) -> int:
    """``evo worker``: join the campaign at the config's (or --storage) URL; one line per attempt."""
    import os

    from evo.config import apply_budget_overrides
    from evo.logmd import write_log
    from evo.progress import print_champion, run_with_progress

    def fail(msg: str) -> int:
        sys.stderr.write(f"evo: {msg}\n")
        return 2

    apply_budget_overrides(cfg, args.attempts, args.minutes)
    if cfg.clocks == "lock":
        return fail("evo worker does not lock clocks (clocks: lock); use clocks: record, or evo run")
    try:
        camp = WorkerCampaign(cfg, command="evo " + " ".join(sys.argv[1:]))
    except CampaignError as e:
        return fail(str(e))
    except (ImportError, SQLAlchemyError, StorageInternalError) as e:  # no driver, no server, bad credentials
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return fail(f"cannot open the storage {_safe_url(cfg.storage)}: {type(e).__name__}: {first}")
    sim = " — simulated from recorded H200 measurements" if camp.simulated else ""
    print(
        f"evo: worker {camp.name} joins campaign {cfg.campaign} ({cfg.family.name}) at {_safe_url(cfg.storage)} "
        f"on the {camp.backend.name} backend{sim}",
        flush=True,
    )
    try:
        summary = run_with_progress(camp, live=False)
    except CampaignError as e:
        return fail(str(e))
    log = cfg.log_dir / "attempts.md"
    try:  # each worker writes the whole log through its own temporary file: the last one to stop wins
        part = write_log(camp.ledger.attempts(), camp.ledger.all_meta(), log.with_name(f".attempts-{os.getpid()}.md"))
        os.replace(part, log)
    except OSError as e:
        print(f"evo: attempt log not written ({e}); `evo log` writes it")
    print(
        f"evo: worker {camp.name} stopped: {summary.stopped}; {summary.new_attempts} new attempt(s) by this worker, "
        f"{summary.attempts} recorded, {camp.taken} proposal(s) taken by another worker first{sim}"
    )
    print_champion(summary, sim)
    return 0


def _safe_url(url: str) -> str:
    """The storage URL without its password."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]
