"""The finish: as the search ends, the champion's near misses measured head to head (search.finish).

A search step needs the lower bound of its speedup to clear ``1 + max(gates.perf.min_gain, 3 x A/A floor)``: with
the default 1% step, a variant 0.5% faster than the champion is turned down even where the A/A floor is 0.05%. On
an H100 (2026-12-07) `evo run mhc_pre_big_fuse` found its champion at attempt #3 and turned down the next 147, five
of them 0.4-0.9% faster in the weighted mean. The finish measures such near misses again, head to head with the
champion and with more rounds, and accepts a step whose lower bound clears what the A/A floor justifies:
``threshold(search.finish.min_gain, floor)``, the perf gate's own bar with the finish's min_gain (default 0:
``1 + 3 x floor``). docs/measurement.md ("The finish") gives the rationale.

When: the campaign loop (evo/loop/campaign.py) calls :func:`run_finish_if_due` once per step, after its budget
check and before it proposes, and once more as it is about to end for an exhausted search space (``ending``). A
finish runs for the champion of the moment when

* the search stalls (trigger ``stall``): ``search.finish.stall`` attempts since the champion was accepted, or
* the budget nears its end (trigger ``end``): no more attempts left than ``budget_share`` of the budget or than the
  finish would measure now (so that it fits in the budget), or less than ``budget_share`` of the minutes; or the
  search space is exhausted.

Each trigger runs at most once per champion: a finish that ended is in the ledger's meta (evo/core/finish_record.py)
and is not run again, by this run or a resumed one; one a stop cut short is continued on resume, without what it
measured already. A candidate a finish measured is never a finish's candidate again. A lone `evo run` only: workers
sharing a storage (and replays) leave the finish out.

What (:func:`plan`): the best ``top_k`` attempts the perf gate turned down for too small a gain (``perf.not_faster``,
timed in full) whose weighted-mean speed was within ``within_pct`` of the champion; then up to ``pairs``
combinations of two of the champion's unmerged single-knob gains (turned-down attempts one knob away from the
champion that measured faster), never tried before, best estimate first.

How: each candidate is a proposal the campaign evaluates as any other (``Campaign.evaluate``: the registered gates
through ``gates.judge.judge``, recorded in the ledger whatever the verdict), tagged ``Attempt.finish`` with its
reason; a near-champion is measured again on purpose (``remeasure``). While the finish measures, the campaign's
config carries the finish's rounds and min_gain (:func:`finish_settings`), so the perf gate computes its bar with
its own ``threshold(min_gain, floor)``. Finish attempts count against the budget like any other; the finish stops
between candidates once the budget is spent or a stop is asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo import stop
from evo.core.finish_record import END, FINISH_META, NEAR, PAIR, STALL, FinishRun, FinishTag, Planned, finish_runs
from evo.core.genome import Genome
from evo.core.hooks import check_genome
from evo.core.records import ACCEPTED, Attempt, Code
from evo.loop.budget import budget_spent
from evo.search import Proposal
from gates import threshold
from gates.stats import geomean

ROUNDS_FACTOR = 3  # search.finish.rounds not given: this many times gates.perf.rounds


@dataclass
class FinishProposal(Proposal):
    """A finish candidate as the campaign evaluates it: ``finish`` becomes the attempt's tag (``Attempt.finish``),
    ``notes`` its notes (the rule it was judged by)."""

    finish: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Candidate:
    """One genome a finish measures, with how it was chosen."""

    genome: Genome
    kind: str  # NEAR or PAIR
    estimate: float  # weighted-mean speed against the champion as measured before (> 1: faster)
    of: tuple[int, ...]  # the attempts it comes from
    why: str

    def planned(self) -> Planned:
        return Planned(self.genome.key, self.kind, list(self.of), self.estimate, self.why)


# --- which attempts are near the champion ------------------------------------------------------------------------
def estimate(a: Attempt, champion: Attempt, weights: Mapping[str, float]) -> float | None:
    """``a``'s weighted geometric-mean speed against ``champion`` (> 1: faster): its own step speedups where it was
    measured against that champion at every weighted geometry, else the ratio of the two scores (each against the
    baseline, measured in other rounds). None where neither is known."""
    weighted = [g for g, w in weights.items() if w > 0]
    if a.parent_id == champion.id and weighted and all(g in a.speedup_vs_parent for g in weighted):
        return geomean([a.speedup_vs_parent[g].value for g in weighted], [weights[g] for g in weighted])
    if a.score and champion.score and math.isfinite(a.score) and math.isfinite(champion.score):
        return a.score / champion.score
    return None


def _near_misses(
    attempts: Sequence[Attempt], champion: Attempt, weights: Mapping[str, float]
) -> dict[str, tuple[float, Attempt]]:
    """Genome key -> (estimate, its latest attempt) of every attempt turned down for too small a gain, timed in
    full (``perf.not_faster``): the only rejections a smaller bar could turn into steps."""
    out: dict[str, tuple[float, Attempt]] = {}
    for a in attempts:
        if a.verdict.code is not Code.PERF_NOT_FASTER or a.genome_key == champion.genome_key:
            continue
        e = estimate(a, champion, weights)
        if e is not None:
            out[a.genome_key] = (e, a)  # the latest measurement of a genome stands
    return out


def near_champions(
    misses: Mapping[str, tuple[float, Attempt]], skip: set[str], top_k: int, within_pct: float
) -> list[Candidate]:
    """The best ``top_k`` near misses within ``within_pct`` percent of the champion, best first."""
    ranked = sorted(
        ((e, a) for key, (e, a) in misses.items() if key not in skip and e >= 1.0 - within_pct / 100.0),
        key=lambda ea: (-ea[0], ea[1].id),
    )
    return [
        Candidate(
            Genome(a.genome),
            NEAR,
            e,
            (a.id,),
            f"#{a.id} measured {e - 1.0:+.2%} against the champion in the weighted mean",
        )
        for e, a in ranked[:top_k]
    ]


def single_knob_gains(
    misses: Mapping[str, tuple[float, Attempt]], champion: Attempt
) -> dict[tuple[str, Any], tuple[float, Attempt]]:
    """(knob, value) -> (estimate, attempt) of the near misses one knob away from the champion that measured faster
    (the best attempt per knob value)."""
    base = Genome(champion.genome)
    out: dict[tuple[str, Any], tuple[float, Attempt]] = {}
    for e, a in misses.values():
        d = Genome(a.genome).diff(base)
        if len(d) != 1 or e <= 1.0:
            continue
        ((knob, (_, value)),) = d.items()
        k = (knob, json_key(value))
        if k not in out or e > out[k][0]:
            out[k] = (e, a)
    return out


def json_key(v: Any) -> Any:
    """A hashable stand-in for a knob value (values are JSON scalars; a list would not hash)."""
    return tuple(v) if isinstance(v, list) else v


def pair_candidates(
    gains: Mapping[tuple[str, Any], tuple[float, Attempt]],
    champion: Attempt,
    valid: Callable[[Genome], str | None],
    skip: set[str],
    n: int,
) -> list[Candidate]:
    """Up to ``n`` combinations of two single-knob gains on different knobs, applied together to the champion,
    best product of estimates first; none already judged or planned (``skip``), none ``valid`` turns down
    (genome -> why it is invalid, or None)."""
    items = sorted(gains.items(), key=lambda kv: (-kv[1][0], kv[1][1].id))
    base = Genome(champion.genome)
    out: list[tuple[float, Candidate]] = []
    for i, ((k1, _), (e1, a1)) in enumerate(items):
        for (k2, _), (e2, a2) in items[i + 1 :]:
            if k1 == k2:
                continue
            g = base.replace(**{k1: a1.genome[k1], k2: a2.genome[k2]})
            if g.key in skip or valid(g):
                continue
            why = (
                f"{k1} {base[k1]}->{a1.genome[k1]} (#{a1.id}, {e1 - 1.0:+.2%}) with {k2} {base[k2]}->{a2.genome[k2]} "
                f"(#{a2.id}, {e2 - 1.0:+.2%})"
            )
            out.append((e1 * e2, Candidate(g, PAIR, e1 * e2, (a1.id, a2.id), why)))
            skip = skip | {g.key}
    out.sort(key=lambda ec: -ec[0])
    return [c for _, c in out[:n]]


def plan(campaign: Any, attempts: Sequence[Attempt], seen: set[str], champion: Attempt) -> list[Candidate]:
    """What a finish measures from ``champion``: near-champions first, then pairs of single-knob gains. Genomes a
    finish measured before are left out; a pair never judged (``seen``) only."""
    f = campaign.cfg.search.finish
    weights = {g.name: g.weight for g in campaign.cfg.geometries}
    misses = _near_misses(attempts, champion, weights)
    measured = {a.genome_key for a in attempts if a.finish}
    near = near_champions(misses, measured, f.top_k, f.within_pct)
    if not f.pairs:
        return near
    geometries = campaign.cfg.geometries
    pairs = pair_candidates(
        single_knob_gains(misses, champion),
        champion,
        lambda g: check_genome(campaign.family, g, geometries),
        set(seen) | measured | {c.genome.key for c in near},
        f.pairs,
    )
    return near + pairs


# --- when -----------------------------------------------------------------------------------------------------
def due(
    campaign: Any,
    attempts: Sequence[Attempt],
    champion: Attempt,
    elapsed: float,
    ending: str | None,
    plan_size: Callable[[], int] = lambda: 0,
) -> tuple[str, str] | None:
    """(trigger, reason) of the finish due now for ``champion``, or None. The ledger's meta is read only where a
    trigger holds: an ``end`` finish that ended for this champion leaves nothing due for it, a ``stall`` one leaves
    the ``end`` trigger; one cut short (stopped) is due again at once, to be continued."""
    f = campaign.cfg.search.finish
    counted = [a for a in attempts if a.verdict.kind != "interrupted"]
    since = sum(1 for a in counted if a.id > champion.id)
    stall = f"stall: {since} attempts since champion #{champion.id}" if since >= f.stall else None
    end = ending or _budget_nearly_spent(campaign.cfg, len(counted), elapsed, plan_size)
    if stall is None and end is None:
        return None
    runs = [r for r in finish_runs({FINISH_META: campaign.ledger.meta(FINISH_META)}) if r.champion == champion.id]
    for r in runs:
        if r.ended is None:
            return r.trigger, r.reason
    done = {r.trigger for r in runs}
    if END in done:
        return None
    if end is not None:
        return END, end
    return (STALL, stall) if stall is not None and STALL not in done else None


def _budget_nearly_spent(cfg: Any, counted: int, elapsed: float, plan_size: Callable[[], int]) -> str | None:
    """Why the budget nears its end (the ``end`` trigger), or None: no more attempts left than budget_share of the
    budget or than the finish would measure now (``plan_size()``, asked only where it could matter: so the finish
    fits in the budget), or less than budget_share of the minutes."""
    f, b = cfg.search.finish, cfg.budget
    if b.attempts is not None:
        left = b.attempts - counted
        share = math.ceil(f.budget_share * b.attempts)
        if left <= share or (left <= f.top_k + f.pairs and left <= plan_size()):
            return f"the budget nears its end: {left} of {b.attempts} attempts left"
    if b.minutes is not None:
        left_s = b.minutes * 60.0 - elapsed
        if left_s <= f.budget_share * b.minutes * 60.0:
            return f"the budget nears its end: {max(left_s, 0.0) / 60:.1f} of {b.minutes:g} min left"
    return None


def finish_rounds(cfg: Any) -> int:
    """Interleaved rounds of each finish measurement: search.finish.rounds, else ROUNDS_FACTOR x gates.perf.rounds."""
    f, p = cfg.search.finish, cfg.gates.perf
    return int(f.rounds) if f.rounds is not None else ROUNDS_FACTOR * p.rounds


@contextlib.contextmanager
def finish_settings(campaign: Any) -> Iterator[None]:
    """While the finish measures, the campaign's config carries the finish's perf settings: its rounds and its
    min_gain, so the perf gate (gates/pipeline/perf.py) bars a step at its own ``threshold(min_gain, floor)``. The
    early-out stays as configured (a candidate slower in every one of its first pairs is still stopped)."""
    cfg = campaign.cfg
    p = cfg.gates.perf
    perf = dataclasses.replace(p, rounds=finish_rounds(cfg), min_gain=cfg.search.finish.min_gain)
    campaign.cfg = dataclasses.replace(cfg, gates=dataclasses.replace(cfg.gates, perf=perf))
    try:
        yield
    finally:
        campaign.cfg = cfg


# --- the entry ------------------------------------------------------------------------------------------------
def run_finish_if_due(campaign: Any, view: Any, ending: str | None = None) -> int | None:
    """Called by the campaign loop once per step, after its budget check and before it proposes, on the step's
    ``view`` of the ledger; ``ending``: the loop is about to end for that reason (the search space exhausted).
    Runs the finish where it is due and returns how many attempts it measured (0: it ran with nothing to try,
    or with no budget left); None where no finish is due (the loop goes on as before)."""
    if not campaign.cfg.search.finish.enabled or campaign.ledger.shared or campaign.replaying:
        return None
    champion = view.champion() or campaign.baseline
    if champion is None:
        return None
    elapsed = campaign._elapsed() if campaign._elapsed is not None else 0.0
    seen = set(view.seen)
    when = due(
        campaign, view.attempts, champion, elapsed, ending, lambda: len(plan(campaign, view.attempts, seen, champion))
    )
    if when is None:
        return None
    return _Finish(campaign, champion, *when).run(view)


class _Finish:
    """One finish run: its plan recorded, each candidate evaluated by the campaign, the end recorded."""

    def __init__(self, campaign: Any, champion: Attempt, trigger: str, reason: str):
        self.c = campaign
        self.champion = champion
        self.trigger = trigger
        self.reason = reason

    def _record(self, run: FinishRun) -> None:
        """The run into the ledger's meta (a new one appended, a resumed one replaced)."""
        led = self.c.ledger
        records = list(led.meta(FINISH_META) or [])
        if run.index < len(records):
            records[run.index] = run.to_record()
        else:
            records.append(run.to_record())
        led.set_meta(FINISH_META, records)

    def _start(self, todo: list[Candidate]) -> FinishRun:
        """The run's record: the one a stop cut short (continued), else a new one."""
        cfg = self.c.cfg
        for r in finish_runs({FINISH_META: self.c.ledger.meta(FINISH_META)}):
            if r.champion == self.champion.id and r.trigger == self.trigger and r.ended is None:
                return r
        f = cfg.search.finish
        run = FinishRun(
            index=len(self.c.ledger.meta(FINISH_META) or []),
            champion=self.champion.id,
            trigger=self.trigger,
            reason=self.reason,
            started_at=_now(),
            rounds=finish_rounds(cfg),
            floor=self.c.floor,
            min_gain=f.min_gain,
            threshold=threshold(f.min_gain, self.c.floor),
            planned=[c.planned() for c in todo],
        )
        self._record(run)
        return run

    def _room(self) -> tuple[int | None, str]:
        """(attempts the budget still has room for, None: no attempt budget; why there is none: the budget spent, or
        the caller's ``stop_when``), asked before each candidate as the loop asks before each proposal."""
        c = self.c
        elapsed = c._elapsed() if c._elapsed is not None else 0.0
        atts = c.ledger.attempts()
        _, spent = budget_spent(c.cfg.budget, atts, elapsed)
        spent = spent or (c.stop_when(atts) if c.stop_when is not None else None)
        if spent:
            return 0, spent
        b = c.cfg.budget
        return (
            None if b.attempts is None else b.attempts - sum(1 for a in atts if a.verdict.kind != "interrupted")
        ), ""

    def run(self, view: Any) -> int:
        c = self.c
        todo = plan(c, view.attempts, set(view.seen), self.champion)
        run = self._start(todo)
        room, why = self._room()
        if room is not None:
            todo = todo[: max(room, 0)]
        p = c.cfg.gates.perf
        rule = (
            f"a step needs its lower bound over the champion to clear {run.threshold:.4f} "
            f"(1 + max(search.finish.min_gain {run.min_gain:g}, 3 x A/A floor {run.floor:.3%})) "
            + ("on every weighted geometry" if p.rule == "every" else "in the weighted mean")
            + f"; search steps need 1 + max(gates.perf.min_gain {p.min_gain:g}, 3 x floor)"
        )
        if not todo:
            c.out(f"finish ({run.reason}) from champion #{run.champion}: nothing to try")
            self._end(run, "nothing to try" if room != 0 else f"cut short: {why}")
            return 0
        n_near = sum(1 for x in todo if x.kind == NEAR)
        c.out(
            f"finish ({run.reason}) from champion #{run.champion}: {n_near} near-champion(s) and "
            f"{len(todo) - n_near} pair(s) of single-knob gains head to head, {run.rounds} rounds; {rule}"
        )
        made = 0
        ended = "done"
        with finish_settings(c):
            for cand in todo:
                stop.check()  # a stop between candidates leaves the run open: a resumed run continues it
                room, why = self._room()
                if room == 0:
                    ended = f"cut short: {why}"
                    break
                a = self._measure(run, cand, rule)
                made += 1
                verdict = "accepted" if a.verdict.status == ACCEPTED else a.verdict.label()
                c.out(f"finish: #{a.id} ({cand.kind}, {cand.why}): {verdict}")
        self._end(run, ended)
        return made

    def _measure(self, run: FinishRun, cand: Candidate, rule: str) -> Attempt:
        """One candidate through the campaign's evaluate, against the champion of the moment (a step the finish
        accepted is the champion the next candidate is held against)."""
        c = self.c
        tag = FinishTag(run.index, run.trigger, run.reason, cand.kind, list(cand.of), cand.estimate)
        prop = FinishProposal(
            cand.genome,
            f"finish ({run.reason}): {cand.kind}, {cand.why}",
            list(cand.of),
            finish=tag.to_record(),
            notes=[f"finish: {rule}"],
        )
        c.champion = c.ledger.champion() or c.baseline
        c._view = None  # the gates hold a new attempt against every recorded one, this finish's too
        c._cycle_t0 = time.perf_counter()
        a: Attempt = c.evaluate(prop, remeasure=cand.kind == NEAR)
        if c.on_attempt:
            c.on_attempt(a, c)
        return a

    def _end(self, run: FinishRun, ended: str) -> None:
        atts = self.c.ledger.attempts()
        mine = [a for a in atts if a.finish and a.finish.get("run") == run.index]
        run.tried = [a.id for a in mine]
        run.accepted = [a.id for a in mine if a.verdict.status == ACCEPTED]
        run.ended, run.ended_at = ended, _now()
        self._record(run)
        if run.accepted:
            self.c.out(
                f"finish: accepted {', '.join(f'#{i}' for i in run.accepted)}; the champion is #{run.accepted[-1]}"
            )


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
