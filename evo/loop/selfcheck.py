"""`evo selfcheck`: the harness checking itself before anyone trusts its verdicts."""

from __future__ import annotations

import dataclasses
from typing import Any

from evo.core.records import ACCEPTED
from evo.loop.campaign import Campaign, now
from evo.loop.replay import recording_aside
from evo.search import Proposal
from gates import threshold
from gates.judge import judge


def selfcheck(camp: Campaign, aa_evaluations: int = 50, faults: bool = True) -> dict[str, Any]:
    """The harness checking itself: an A/A acceptance check, then the family's deliberate faults.

    A/A: ``aa_evaluations`` full perf-gate decisions (the judge's perf gate, as
    `evo run` makes them) of a second copy of the baseline against the baseline;
    none may be accepted. Faults: each named source
    edit of the family is evaluated like any attempt (recorded in the side
    study ``<campaign>:selfcheck``, never among the campaign's attempts) and
    must be rejected by the correctness gate. The summary goes into the
    campaign's meta (``selfcheck``: what its log shows).
    """
    with recording_aside(camp, "selfcheck") as side:
        out = _selfcheck(camp, aa_evaluations, faults)
        out["study"] = side.study.study_name
        side.base.set_meta("selfcheck", out)
    return out


def _selfcheck(camp: Campaign, aa_evaluations: int, faults: bool) -> dict[str, Any]:
    camp.setup()
    champion = camp.champion
    p = camp.cfg.gates.perf
    base = camp.family.baseline()
    camp._load(None if camp.simulated else camp.builder.build(base), base)  # cached: the perf gate's baseline
    b = camp.backend.load(None if camp.simulated else camp.builder.build(base), base)
    # The perf gate as `evo run` judges a step (the judge's, with the config's every argument), the baseline's copy
    # against the baseline: the context has no champion, so the baseline's cached module is what it must beat.
    ctx = dataclasses.replace(camp.judge_context(), champion=None)
    accepted, lows = 0, []
    for _ in range(aa_evaluations):
        verdict, ev = judge(Proposal(base, "A/A"), ctx, only=("perf",), loaded=b)
        accepted += verdict.status == ACCEPTED
        lows.append(min(iv.lo for iv in ev.attempt.speedup_vs_parent.values()))
    out: dict[str, Any] = {
        "at": now(),
        "backend": camp.backend.name,
        "aa": {
            "evaluations": aa_evaluations,
            "accepted": accepted,
            "rounds_each": p.rounds,
            "max_lower_bound": max(lows) if lows else None,
            "threshold": threshold(p.min_gain, camp.floor),
            "floor": camp.floor,
        },
        "faults": {},
    }
    if faults:
        for title in camp.family.faults:
            want = camp.family.fault_expectation(title)
            # Static faults (compile errors, stack frames) are judged anywhere; the rest need a GPU.
            att = camp.evaluate(
                Proposal(base, f"fault: {title}"), source=camp.family.faulty_source(title), remeasure=True
            )
            camp.champion = champion  # (a fault accepted is a wrong verdict, never a step of the campaign)
            got = att.verdict.label()
            needs_gpu = camp.simulated and att.verdict.kind == "not_recorded"
            out["faults"][title] = {
                "attempt": att.id,
                "verdict": got,
                "expected": want,
                "reason": att.verdict.reason,
                "ok": None if needs_gpu else got == want,
            }
            if camp.on_attempt:
                camp.on_attempt(att, camp)
    return out
