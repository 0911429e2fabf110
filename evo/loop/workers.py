"""Several workers on one campaign: ``evo worker <config> [--storage URL]``.

Each worker is one process (one per GPU: give each its own
``CUDA_VISIBLE_DEVICES``; or one per host) that joins the campaign named in the
config through its storage URL, typically PostgreSQL
(``postgresql+psycopg2://user:pw@host/db``; ``pip install -e '.[pg]'``), and
runs the campaign loop (``Campaign.run`` in evo/loop/campaign.py, the loop of ``evo run``) against the
shared ledger. The ledger does the
coordination (evo/ledger/reserve.py, "Shared mode", and evo/ledger/sessions.py, "Liveness"):

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
from typing import Any

from optuna.exceptions import StorageInternalError
from sqlalchemy.exc import SQLAlchemyError

from evo.ledger.storage_url import safe_url
from evo.loop.campaign import Campaign
from evo.loop.errors import CampaignError
from evo.loop.shared import POLL_S, RESERVE_TRIES

__all__ = ["POLL_S", "RESERVE_TRIES", "WorkerCampaign", "cli_worker"]


class WorkerCampaign(Campaign):
    """The campaign loop (``Campaign.run``) on a storage shared with other workers: each proposal reserved in the
    ledger as it is made, the budget and the baseline held there for all, each worker's proposer seeded apart."""

    SESSION_MODE = "worker"
    SHARED = True


def cli_worker(cfg: Any, args: Any) -> int:
    """``evo worker``: join the campaign at the config's (or --storage) URL; one line per attempt."""
    import os

    from evo.config import apply_budget_overrides
    from evo.report.logmd import write_log
    from evo.report.progress import print_champion, run_with_progress

    def fail(msg: str) -> int:
        sys.stderr.write(f"evo: {msg}\n")
        return 2

    apply_budget_overrides(cfg, args.attempts, args.minutes)
    if cfg.clocks == "lock":
        return fail("evo worker does not lock clocks (clocks: lock); use clocks: record, or evo run")
    try:
        camp = WorkerCampaign(cfg, command="evo " + " ".join(sys.argv[1:]))
        camp.claim()  # before "joins" is printed: a refused worker says one line only
    except CampaignError as e:
        return fail(str(e))
    except (ImportError, SQLAlchemyError, StorageInternalError) as e:  # no driver, no server, bad credentials
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return fail(f"cannot open the storage {safe_url(cfg.storage)}: {type(e).__name__}: {first}")
    sim = f" — {camp.label}" if camp.simulated else ""
    print(
        f"evo: worker {camp.name} joins campaign {cfg.campaign} ({cfg.family.name}) at {safe_url(cfg.storage)} "
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
