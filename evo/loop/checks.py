"""What the campaign measures beyond the gates' own evidence, handed to the gates as narrow callables (the
sanitizer over a step, the step end to end) or run at the end of a run (the champion against the copy ceiling).

Each takes what it reads as arguments, never the campaign; each records or returns its result and loses nothing on
a failure of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evo.core.records import Attempt, Code, Verdict
from evo.loop.attempt import now
from evo.loop.modules import LoadedModules
from evo.loop.report_lines import launches_note
from evo.measure import ceiling as ceiling_mod


def sanitize_step(
    cfg: Any,
    a: Attempt,
    source_variant: bool,
    ideas: Mapping[str, Any],
    backend: str,
    simulated: bool,
    out: Callable[[str], None],
    label: str,
) -> Any:
    """compute-sanitizer over a step that passed perf (issue 31), for the sanitizer gate to judge
    (gates/pipeline/sanitizer.py): the config's tools, the campaign's ideas and log folder; ``label``: where a
    simulated run's numbers come from (the skip line says it)."""
    from evo.measure.sanitize import run_step

    return run_step(cfg, a, ideas, backend, simulated, source_variant, out, label)


def _genome_file(cfg: Any, a: Attempt) -> Any:
    from evo.measure.e2e import write_genome_file

    return write_genome_file(cfg.log_dir / "e2e" / f"genome-{a.id}.json", {cfg.family.name: a.genome})


def _e2e_frozen(cfg: Any, ledger: Any, baseline: Attempt | None) -> dict[str, Any]:
    """The baseline's token stream hash and tokens/s, measured once per campaign."""
    from evo.measure.e2e import run_e2e

    frozen = ledger.meta("e2e_frozen")
    if frozen is None:
        e = cfg.e2e
        assert e is not None and baseline is not None
        r = run_e2e(list(e.command), _genome_file(cfg, baseline), e.runs, e.timeout_s, e.env)
        frozen = {"hash": r.hash, "median": r.median, "spread": r.spread, "argv": r.argv, "at": now()}
        ledger.set_meta("e2e_frozen", frozen)
    return frozen


def e2e_step(cfg: Any, ledger: Any, champion: Attempt | None, baseline: Attempt | None, a: Attempt) -> None:
    """Observe the step end to end: champion and candidate decode interleaved, held against the bound."""
    from evo.measure.e2e import MEASUREMENT_ERROR, REJECTED, E2EError, compare_e2e, judge

    e = cfg.e2e
    champ = champion or baseline
    assert e is not None and a.bound is not None and champ is not None
    try:
        frozen = _e2e_frozen(cfg, ledger, baseline)
        base, cand, gain = compare_e2e(
            list(e.command), _genome_file(cfg, champ), _genome_file(cfg, a), e.runs, e.timeout_s, e.env
        )
    except E2EError as err:
        a.bound.update({"e2e": "error", "e2e_reason": str(err), "claim": False})
        a.notes.append(f"e2e: {err}")
        return
    verdict, reason = judge(gain, a.bound["bound"], a.bound["decode_floor"], cand.hash, frozen["hash"])
    a.bound.update(
        {
            "observed": gain,
            "e2e": verdict,
            "e2e_reason": reason,
            "tokens_per_s": cand.median,
            "champion_tokens_per_s": base.median,
            "token_hash": cand.hash,
        }
    )
    if verdict == REJECTED:
        a.verdict = Verdict.rejected("e2e", reason, Code.E2E_TOKENS)
    elif verdict == MEASUREMENT_ERROR:
        a.bound["claim"] = False  # the kernel step stands on its own evidence; the decode figure does not


def ceiling_check(
    cfg: Any, ledger: Any, modules: LoadedModules, champ: Attempt | None, out: Callable[[str], None]
) -> dict[str, Any] | None:
    """The champion against the copy ceiling, measured alternately (evo/measure/ceiling.py), appended to the
    ledger's ``ceiling_checks``. Called at the end of a run; a failure is recorded with its reason and loses
    nothing."""
    p, family, backend = cfg.gates.perf, cfg.family, modules.backend
    geos = [g for g in cfg.geometries if g.weight > 0 and family.bytes_moved(g)]
    if not p.ceiling_check or champ is None or not geos:
        return None
    check: dict[str, Any] = {
        "champion": champ.id,
        "genome_key": champ.genome_key,
        "at": now(),
        "backend": backend.name,
        "simulated": modules.simulated,
        "method": (
            f"{p.ceiling_check} alternations of one copy-ceiling trial and the "
            f"champion's {p.rounds} batches (graph x launches of about "
            f"{p.batch_ms:g} ms, median; throttled rounds dropped) at each weighted "
            "geometry, the ceiling first in every other one; each alternation's own "
            "ratio"
        )
        + launches_note(p.launch, family, [("champ", champ)]),
    }
    try:
        loaded = modules.load(None if modules.simulated else modules.builder.build(champ.genome), champ.genome)
        # batches of about batch_ms of the champion itself, as the campaign timed it
        launches = {g.name: modules.part_launches([("champ", loaded)], [champ.genome_key], g)["champ"] for g in geos}
        check["launches"] = launches
        trials = ceiling_mod.run_check(backend, loaded, geos, launches, p.rounds, p.ceiling_check)
        check["trials"] = trials
        check["geometries"] = ceiling_mod.summarize(trials, {g.name: family.bytes_moved(g) for g in geos})
    except Exception as e:  # a GPU fault here must not cost the campaign its ledger
        check["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    except KeyboardInterrupt:  # Ctrl-C during the check ends the run as the loop's would, with a record
        check["error"] = "interrupted by the user"
    ledger.append_meta("ceiling_checks", check)  # (workers sharing a campaign each add theirs)
    for line in ceiling_mod.describe(check):
        out(f"champion #{champ.id} against the copy ceiling, side by side: {line}")
    return check
