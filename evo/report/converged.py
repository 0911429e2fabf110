"""Whether a campaign has converged: how many attempts in a row, since its champion was accepted, brought nothing.

Called by the attempt log (its Convergence section) and `evo status` (text and --json), so that a campaign whose
champion came at #7 and whose 143 attempts since changed nothing says so, instead of leaving the reader to count.
"Converged" is a statement about this search with this budget, not a proof that nothing faster exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo.core.records import Attempt

CONVERGED_AFTER = 30  # attempts in a row without a new champion (a measured or judged attempt each)


@dataclass(frozen=True)
class Convergence:
    """The champion, and the attempts judged after it (interrupted ones and the baseline not counted)."""

    champion: int
    since: int  # attempts judged since the champion was accepted (or since the baseline)

    @property
    def converged(self) -> bool:
        return self.since >= CONVERGED_AFTER

    def note(self) -> str:
        """One sentence for the log and status (only where converged)."""
        return (
            f"converged: the last {self.since} attempts in a row brought no new champion (champion #{self.champion}); "
            "more of the same budget is unlikely to help: widen the knobs, add ideas, or stop here"
        )


def convergence(attempts: Sequence[Attempt]) -> Convergence | None:
    """The campaign's convergence state, None while it has no baseline."""
    ordered = sorted(attempts, key=lambda a: a.id)
    marks = [a.id for a in ordered if a.verdict.status in ("accepted", "baseline")]
    if not marks:
        return None
    champ = marks[-1]
    since = sum(1 for a in ordered if a.id > champ and a.verdict.kind != "interrupted")
    return Convergence(champ, since)
