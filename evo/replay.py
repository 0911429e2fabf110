"""`evo replay`: rejected ideas re-judged on this machine with today's gates."""

from __future__ import annotations

from evo.campaign import Campaign, CampaignError
from evo.genome import Genome
from evo.ideas import outside_answer_replayable
from evo.proposers import Proposal
from evo.records import Attempt


def replay(camp: Campaign, *, gate: str | None = None, ids: list[int] | None = None) -> list[tuple[Attempt, Attempt]]:
    """Re-judge rejected attempts on this machine with today's gates; each new attempt links its original.

    ``gate`` keeps only attempts rejected by that gate (or errors of that kind); ``ids`` only those attempts.
    Returns (original, new) pairs in order.
    """
    camp.setup()
    targets = []
    everything = camp.ledger.attempts()
    by_id = {a.id: a for a in everything}
    for a in everything:
        if a.verdict.status not in ("rejected", "error") or a.verdict.kind == "interrupted":
            continue
        if not outside_answer_replayable(a, by_id):  # ideas: a failed outside answer holds no variant to re-judge
            continue
        if ids is not None and a.id not in ids:
            continue
        if gate is not None and gate not in (a.verdict.gate, a.verdict.kind):
            continue
        targets.append(a)
    if ids:
        missing = sorted(set(ids) - {a.id for a in targets})
        if missing:
            raise CampaignError(
                f"attempt(s) {', '.join(f'#{i}' for i in missing)} are not rejected attempts of "
                f"campaign {camp.cfg.campaign}"
            )
    pairs = []
    for old in targets:
        source = None
        if old.origin.startswith("fault: "):
            title = old.origin[len("fault: ") :]
            if title not in camp.family.faults:
                continue
            source = camp.family.faulty_source(title)
        prop = Proposal(Genome(old.genome), f"replay of #{old.id} ({old.backend}, {old.verdict.label()})", [old.id])
        new = camp.evaluate(prop, source=source, remeasure=True)
        if camp.on_attempt:
            camp.on_attempt(new, camp)
        pairs.append((old, new))
    return pairs
