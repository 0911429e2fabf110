"""The judge: one proposal through the registered gates (gates/registry.py), in order, over a read-only context.

``judge`` is what the campaign loop calls for every attempt (``Campaign.evaluate``; ``evo run``, ``evo worker``,
``evo replay`` and ``evo selfcheck`` all go through it). A gate receives the ``Evidence`` of the attempt being judged:
the ``JudgeContext`` (what the campaign knows, read-only), the proposal, the attempt it fills in, and what the
gates before it left there (the build, the loaded module, the exact-mode knobs). It never sees the campaign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.core.records import ACCEPTED, Attempt, Verdict
from gates.registry import gate_order


@dataclass(frozen=True)
class JudgeContext:
    """What the gates may read of the campaign, made by the loop once per attempt (the champion and the recorded
    attempts change between attempts). Read-only: a gate that needs to keep something keeps it in ``Evidence``.

    The callables are the campaign's capabilities the gates use, each a narrow function (the campaign itself is not
    reachable from here).
    """

    family: Any  # evo.core.family.Family
    builder: Any  # harness.build.Builder (or a test's): build(genome, source) -> Built
    backend: Any  # evo.core.protocols.Backend
    config: Any  # evo.config.CampaignConfig: .gates (static, correctness, perf), .geometries, .bound, .e2e
    ideas: Mapping[str, Any]  # the campaign's source-level ideas by slug (evo/search/ideas.py)
    simulated: bool  # the backend replays recorded measurements (said in every timing's method)
    baseline: Attempt | None
    champion: Attempt | None  # None until the first accepted step: the baseline stands for it
    base_resources: Mapping[str, Any]  # the baseline's ptxas resources by module (the static gate)
    floor: float  # the campaign's noise floor (the perf gate's threshold)
    floors: Mapping[str, float]  # per geometry
    ceiling: Mapping[str, float]  # the copy ceiling ("ceiling_tbps"), empty when not measured
    # --- the campaign's capabilities -------------------------------------------------------------------------------
    load: Callable[[Any, Mapping[str, Any]], Any]  # (built, genome) -> the loaded module, cached by genome
    load_genome: Callable[[Mapping[str, Any]], Any]  # genome -> its loaded module (built when not cached)
    launch_sha256: Callable[[Any], str]  # genome -> its launch digest (evo/core/variant.py); raises LaunchError
    part_launches: Callable[[Sequence[tuple[str, Any]], Sequence[str], Any], dict[str, int]]
    launches_note: Callable[[Sequence[tuple[str, Any]], Any], str]  # the timing method's words on graph sizes
    inexact_ideas: Callable[[Mapping[str, Any]], list[str]]  # genome -> its ideas that change summation order
    uses_ideas: Callable[[Mapping[str, Any]], bool]  # genome -> whether it applies any source-level idea
    sanitize: Callable[[Attempt, bool], Verdict]  # (attempt, source variant) -> the sanitizer's verdict
    e2e: Callable[[Attempt], None]  # observe an accepted step end to end (fills attempt.bound, may reject)
    load_profile: Callable[[Any], Any]  # path -> the decode profile (evo/measure/profile.py) of the bound gate


@dataclass
class Evidence:
    """One attempt as the gates see it: what the judge hands each gate in turn, and what each leaves for the next (the
    build, the loaded module, the exact-mode knobs). Returned by ``judge`` with the verdict."""

    context: JudgeContext
    proposal: Any  # evo.search.Proposal: .genome (a Genome), .origin
    attempt: Attempt
    source: str | None = None  # a source variant (a fault, a replayed patch) instead of the genome's own
    remeasure: bool = False  # a replay measures identical machine code again on purpose
    recorded: list[Attempt] = field(default_factory=list)  # the attempts before this one (identical SASS)
    built: Any = None
    loaded: Any = None
    inexact: dict[str, list[str]] = field(default_factory=dict)
    t0: float = 0.0  # when measuring began (the attempt's measure_s)

    @property
    def accepted(self) -> bool:
        return self.attempt.verdict.status == ACCEPTED


def judge(
    proposal: Any,
    context: JudgeContext,
    attempt: Attempt,
    *,
    source: str | None = None,
    remeasure: bool = False,
    recorded: Sequence[Attempt] = (),
    gates: Sequence[Callable[[Evidence], Verdict | None]] | None = None,
) -> tuple[Verdict, Evidence]:
    """Judge ``proposal`` into ``attempt`` with ``gates`` (default: the registry's ``gate_order()``), cheapest first;
    called once per attempt by the loop. A gate's Verdict becomes the attempt's; a failing one ends the judgement
    (``accepted`` passes on to the gates that only look at accepted attempts). An exception from a gate propagates
    with the attempt as far as it got (the loop records a harness error as its kind)."""
    ev = Evidence(context, proposal, attempt, source, remeasure, list(recorded))
    for gate in gate_order() if gates is None else gates:
        v = gate(ev)
        if v is not None:
            attempt.verdict = v
            if not v.ok:
                break
    return attempt.verdict, ev
