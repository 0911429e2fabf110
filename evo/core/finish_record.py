"""What the finish (evo/loop/finish.py) leaves in the ledger: one ``FinishRun`` per finish in the campaign's meta
(``FINISH_META``), and a ``FinishTag`` on every attempt it measured (``Attempt.finish``).

Written by the finish, read by it again on resume (a finish that ended is never run again) and by the log
(evo/report/finish_log.py). Both are stored as plain JSON mappings; reading tolerates keys missing or added.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FINISH_META = "finishes"  # study meta: the list of FinishRun records, in the order the finishes started

STALL = "stall"  # the trigger: attempts since the champion's acceptance reached search.finish.stall
END = "end"  # the trigger: the budget nears its end, or the search space is exhausted

NEAR = "near-champion"  # a candidate: an attempt turned down for too small a gain, measured again
PAIR = "pair"  # a candidate: the champion with two of its unmerged single-knob gains


@dataclass
class FinishTag:
    """On an attempt the finish measured (``Attempt.finish``): which finish and why, and what the attempt is."""

    run: int  # the finish's index in FINISH_META
    trigger: str  # STALL or END
    reason: str  # why the finish ran, in words
    kind: str  # NEAR or PAIR
    of: list[int]  # the attempts it comes from (the near-champion; the two single-knob gains)
    estimate: float  # its weighted-mean speed against the champion, as measured before the finish

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Planned:
    """One candidate of a finish's plan, as recorded before it is measured."""

    genome_key: str
    kind: str
    of: list[int]
    estimate: float
    why: str


@dataclass
class FinishRun:
    """One finish: from which champion, why, under which rule, what it planned, and how it ended (``ended`` None:
    it was stopped before it ended, and a resumed run continues it without what it measured already)."""

    index: int
    champion: int  # the champion's attempt id when the finish started
    trigger: str  # STALL or END
    reason: str
    started_at: str
    rounds: int  # interleaved rounds of each finish measurement
    floor: float  # the A/A floor of the session it ran in
    min_gain: float  # search.finish.min_gain
    threshold: float  # what a step's lower bound had to clear: gates.perf.threshold(min_gain, floor)
    planned: list[Planned] = field(default_factory=list)
    ended: str | None = None  # "done", "nothing to try", "cut short: ..."
    ended_at: str = ""
    tried: list[int] = field(default_factory=list)  # attempt ids measured by this finish
    accepted: list[int] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> FinishRun | None:
        """The run a meta entry holds, or None where it is not one (a damaged entry is skipped, never fatal)."""
        try:
            names = {f.name for f in dataclasses.fields(cls)}
            kw = {k: v for k, v in d.items() if k in names}
            kw["planned"] = [
                Planned(**{k: v for k, v in p.items() if k in Planned.__dataclass_fields__})
                for p in d.get("planned") or []
            ]
            return cls(**kw)
        except (TypeError, AttributeError):
            return None


def finish_runs(meta: Mapping[str, Any]) -> list[FinishRun]:
    """Every finish recorded in a campaign's meta, in order."""
    out = []
    for d in meta.get(FINISH_META) or []:
        run = FinishRun.from_record(d) if isinstance(d, Mapping) else None
        if run is not None:
            out.append(run)
    return out
