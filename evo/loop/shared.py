"""What the loop does on a storage shared with other workers (``evo worker``, evo/loop/workers.py): reserve each
proposal as it is made, wait while the others hold the rest of the budget, and record a dead worker's attempts as
interrupted. On a storage of its own (``evo run``) each of these is a no-op or returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from evo import stop
from evo.core.protocols import AskedTrial, Storage, StorageView
from evo.core.records import Attempt
from evo.ledger.ledger import GenomeTaken
from evo.loop.report_lines import recovered_line
from evo.search import Proposal

POLL_S = 0.2  # how often a worker waiting on others looks at the ledger again
# proposals in a row another worker reserved first before the step reads the ledger again (its running trials
# then tell the proposer what the others hold)
RESERVE_TRIES = 8


# a proposal and its trial: reserved at once on a shared storage, else None until the loop asks it
Reserved = tuple[Proposal, AskedTrial | None]


def reserve(
    ledger: Storage, proposer: Any, attempts: list[Attempt], seen: set[str], taken: Callable[[], None]
) -> Reserved | None:
    """Propose a genome: (proposal, its trial), or None when nothing is left.

    On a shared storage the genome is reserved at once (its trial RUNNING, so that other workers propose
    something else); elsewhere the trial is None and evaluate() asks it. Called by the loop for the proposal to
    measure now and for the one compiled ahead. A genome another worker reserved first is counted (``taken()``)
    and left out of the next proposal, made at once; after RESERVE_TRIES of them GenomeTaken passes on, as does
    BudgetTaken.
    """
    seen = set(seen)
    for n in range(RESERVE_TRIES):
        prop = proposer.propose(attempts, seen)
        if prop is None or not ledger.shared:
            return None if prop is None else (prop, None)
        try:
            return prop, ledger.ask(fixed=prop.genome)
        except GenomeTaken as e:
            taken()
            seen.add(e.genome_key)
            if n == RESERVE_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def others_hold_the_rest(ledger: Storage, budget: Any, counted: list[Attempt], view: StorageView, pending: Any) -> bool:
    """The rest of the attempt budget is being measured by other workers (one may still be interrupted); a pending
    trial of this worker's own is within the budget."""
    full = budget.attempts is not None and len(counted) + len(view.running) >= budget.attempts
    return bool(full and pending is None and ledger.shared)


def recover_dead(ledger: Storage, last_check: float, worker: str, out: Callable[[str], None]) -> float:
    """Once a heartbeat period since ``last_check``: the attempts of a stopped worker recorded as interrupted.
    Returns when this last looked."""
    if not (ledger.shared and time.monotonic() - last_check >= ledger.heartbeat_s):
        return last_check
    lost = ledger.recover()
    if lost:
        out(recovered_line(worker, lost))
    return time.monotonic()


def wait() -> None:
    """A worker waiting on the others: a stop request is honoured, then the ledger is read again."""
    stop.check()
    time.sleep(POLL_S)
