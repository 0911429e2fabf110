"""`evo replay`: rejected ideas re-judged on this machine with today's gates.

The new attempts go into the campaign's side study ``<campaign>:replay`` (evo/ledger/ledger.py ``SideLedger``), never
into the campaign's own: its attempt count, champion, log, plot and Optuna views stay as the campaign made them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from evo import stop
from evo.core.genome import Genome
from evo.core.records import Attempt
from evo.ledger.ledger import Ledger, SideLedger
from evo.loop.campaign import Campaign, CampaignError
from evo.search import Proposal
from evo.search.ideas import outside_answer_replayable


def replay(camp: Campaign, *, gate: str | None = None, ids: list[int] | None = None) -> list[tuple[Attempt, Attempt]]:
    """Re-judge rejected attempts on this machine with today's gates; each new attempt links its original.

    ``gate`` keeps only attempts rejected by that gate (or errors of that kind); ``ids`` only those attempts.
    Returns (original, new) pairs in order; the new attempts are recorded in the side study ``<campaign>:replay``
    (their ids are its trial numbers), each judged against the campaign's champion.
    """
    with recording_aside(camp, "replay") as side:
        pairs = _replay(camp, gate, ids)
        if pairs:  # the campaign's meta names where its replays went (no attempt of the campaign changes)
            side.base.append_meta(
                "replays",
                {
                    "study": side.study.study_name,
                    "at": pairs[-1][1].finished_at,
                    "backend": camp.backend.name,
                    "pairs": [[o.id, n.id, o.verdict.label(), n.verdict.label()] for o, n in pairs],
                },
            )
    return pairs


@contextlib.contextmanager
def recording_aside(camp: Campaign, kind: str) -> Iterator[SideLedger]:
    """While inside: ``camp`` records its attempts and meta into the side study ``<campaign>:<kind>``, reading the
    campaign's through it; its champion is the campaign's throughout. Afterwards ``camp.ledger`` is the campaign's
    again (what the caller logs and releases)."""
    base = camp.ledger
    if not isinstance(base, Ledger):  # (memory:) nothing of the campaign was kept to run beside
        raise CampaignError(f"evo {kind} needs the campaign in a database (storage: sqlite:///... or postgresql://)")
    side = base.side(kind)
    camp.ledger = side
    try:
        yield side
    finally:
        camp.ledger = base


def _replay(camp: Campaign, gate: str | None, ids: list[int] | None) -> list[tuple[Attempt, Attempt]]:
    camp.setup()
    champion = camp.champion
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
        if stop.requested() is not None:  # between attempts: those re-judged are kept (and named in the meta)
            break
        source = None
        if old.origin.startswith("fault: "):
            title = old.origin[len("fault: ") :]
            if title not in camp.family.faults:
                continue
            source = camp.family.faulty_source(title)
        prop = Proposal(Genome(old.genome), f"replay of #{old.id} ({old.backend}, {old.verdict.label()})", [old.id])
        new = camp.evaluate(prop, source=source, remeasure=True)
        camp.champion = champion  # a replay accepted here is no step of the campaign: the next one faces its champion
        if camp.on_attempt:
            camp.on_attempt(new, camp)
        pairs.append((old, new))
    return pairs
