"""What one step of a campaign loop reads of its storage (:class:`View`), and the two rules it is read by: which
attempt is the champion, and which genomes are taken.

Called by the ledgers (evo/ledger/ledger.py, evo/ledger/memory_ledger.py) for ``champion()``, ``seen_keys()`` and
``view()``, once per step of the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from evo.core.protocols import AskedTrial
from evo.core.records import ACCEPTED, BASELINE, Attempt
from evo.ledger.rows import ATTEMPT_ATTR, GENOME_KEY_ATTR, INTERRUPTED


@dataclass
class View:
    """What one step of a campaign loop looks at, from one read of the trials (:meth:`Ledger.view`).

    ``attempts``: every recorded attempt by id (as ``Ledger.attempts()``); ``seen``: genomes judged or being
    judged (as ``seen_keys()``); ``running``: trials asked and not yet recorded (as ``running()``).
    """

    attempts: list[Attempt]
    seen: set[str]
    running: list[AskedTrial]  # Optuna's FrozenTrial (Ledger), MemoryTrial (MemoryLedger)

    def champion(self) -> Attempt | None:
        """As ``Ledger.champion()``, from these attempts."""
        return champion_of(self.attempts)


def champion_of(atts: Sequence[Attempt]) -> Attempt | None:
    """The newest accepted attempt, else the baseline, else None."""
    for a in reversed(atts):
        if a.verdict.status == ACCEPTED:
            return a
    return next((a for a in atts if a.verdict.status == BASELINE), None)


def seen_of(trials: Sequence[FrozenTrial]) -> set[str]:
    """Genomes judged or being judged (RUNNING trials' too); interrupted ones may be proposed again."""
    out = set()
    for t in trials:
        ua = t.user_attrs
        if t.state == TrialState.RUNNING:
            key = t.system_attrs.get(GENOME_KEY_ATTR) or ua.get("genome_key")
            if key:
                out.add(key)
        elif ATTEMPT_ATTR in ua and "genome_key" in ua and ua.get("verdict") != INTERRUPTED:
            out.add(ua["genome_key"])
    return out
