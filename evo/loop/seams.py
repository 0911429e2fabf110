"""The campaign's seams made from its config, and what a resume must match: called once, as a campaign starts.

``make_backend`` (the backend registry's entry, isolated in a worker process where asked), ``open_storage`` (the
config's ledger), ``make_proposer`` (the config's proposer in the idea layer), ``config_fingerprint`` and
``check_resume`` (a resumed campaign is the same one), ``claim_session`` (one live runner per campaign, or workers).
The loop (evo/loop/campaign.py) holds what these return and never builds one itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from evo.config import CampaignConfig, narrow_to_recorded
from evo.core.protocols import Backend, Storage
from evo.ledger.ledger import BudgetDiffers, SessionTaken
from evo.ledger.storage import open_ledger
from evo.ledger.storage_url import safe_url
from evo.loop.errors import CampaignError
from evo.search import PROPOSERS
from harness.build import Builder
from harness.errors import HarnessError


def make_backend(cfg: CampaignConfig, builder: Builder) -> Backend:
    """The config's backend from its registry entry (evo/backends.py); auto: the GPU when one is present, else the
    recorded H200 measurements. Isolated in a worker process where ``worker.isolation`` asks for it."""
    from evo.backends import REGISTRY, resolve
    from harness.gpu import gpu_available, gpu_problem

    kind = resolve(cfg.backend, cfg.family)
    recorded_only = getattr(cfg.family, "recorded_only", False)  # a Kernel Tuner cache: no kernel to run
    if recorded_only and kind != "recorded":
        raise CampaignError(f"family {cfg.family.name} is a Kernel Tuner cache: it replays on backend: recorded only")
    entry = REGISTRY.get(kind)
    if entry is None:
        raise CampaignError(f"backend: {kind} is not registered (registered: {', '.join(REGISTRY)})")
    if entry.needs_gpu and not gpu_available():
        problem = gpu_problem() or "no CUDA GPU is visible"  # a driver too old for CuPy's CUDA is said as such
        raise CampaignError(f"backend: {kind} was asked for but {problem} (use backend: recorded or auto)")
    if cfg.gates.perf.launch != "plain" and not entry.pdl:
        raise CampaignError(
            f"gates.perf.launch: {cfg.gates.perf.launch} needs a backend that times such launches ({kind} does not)"
        )
    isolate = cfg.worker.isolation == "worker" or (cfg.worker.isolation == "auto" and entry.isolate_by_default)
    try:
        if isolate:
            from harness.worker import WorkerBackend, WorkerCrash

            try:
                return WorkerBackend(
                    entry.worker,
                    {"config": str(cfg.path), "backend": kind, "storage": cfg.storage},
                    cfg.worker.timeout_s,
                )
            except WorkerCrash as e:
                raise CampaignError(f"the {kind} worker could not start: {e}") from None
        return entry.factory()(cfg, builder)
    except HarnessError as e:
        raise CampaignError(f"{entry.unavailable}{e}") from None


def open_storage(cfg: CampaignConfig, shared: bool) -> Storage:
    """The config's ledger; ``shared`` (evo worker): the attempt budget is held there for all workers."""
    limit = cfg.budget.attempts if shared else None
    return open_ledger(cfg.storage, cfg.campaign, cfg.family.knobs, shared=shared, limit=limit)


def config_fingerprint(cfg: CampaignConfig) -> dict[str, Any]:
    """What must stay the same for a campaign to be resumed."""
    return {
        "campaign": cfg.campaign,
        "family": cfg.family.name,
        "geometries": [{"name": g.name, "params": dict(g.params), "weight": g.weight} for g in cfg.geometries],
        "gates": asdict(cfg.gates),
        "knobs": {k.name: list(k.values) for k in cfg.family.knobs},
    }


def campaign_meta(
    given: CampaignConfig, cfg: CampaignConfig, narrowed: list[str], command: str, backend: str, simulated: bool
) -> dict[str, Any]:
    """The meta a new campaign's ledger starts with (written in one transaction): the fingerprint of the config as
    given, the knob values searched where the backend narrowed them, the budget, proposer, storage and command."""
    from evo.loop.attempt import now

    return {
        "config": {
            **config_fingerprint(given),
            **({"searched_knobs": narrowed} if narrowed else {}),
            "budget": asdict(cfg.budget),
            "proposer": asdict(cfg.proposer),
            "storage": cfg.storage,
            "command": command,
            "seed": cfg.seed,
        },
        "backend": backend,
        "simulated": simulated,
        "started_at": now(),
    }


def check_resume(ledger: Any, given: CampaignConfig, backend: str, replaying: bool) -> None:
    """CampaignError where the ledger's campaign (none for a new one) is another than the config's: run on another
    backend (unless replayed), or with other family, geometries or knobs."""
    old = ledger.meta("config")
    if old is None:
        return
    old_backend = ledger.meta("backend")
    fp = config_fingerprint(given)
    if old_backend and old_backend != backend and not replaying:  # the more telling refusal first
        raise CampaignError(
            f"campaign {given.campaign!r} was run on the {old_backend} backend and this machine uses "
            f"{backend}; rename the campaign or give another storage (--storage)"
        )
    for key in ("family", "geometries", "knobs"):
        if old.get(key) != fp[key]:
            raise CampaignError(
                f"storage {given.storage} holds campaign {given.campaign!r} with different {key}; "
                "rename the campaign or give another storage to start a new one"
            )


def claim_session(ledger: Any, mode: str, cfg: CampaignConfig) -> None:
    """Register this process as the campaign's runner (``mode``: run or worker), or CampaignError naming the one that
    runs it."""
    try:
        ledger.claim(mode)
    except BudgetDiffers as e:  # the attempt budget is one for all workers: each would stop at its own
        raise CampaignError(
            f"campaign {cfg.campaign!r} at {safe_url(cfg.storage)}: {e}; workers share one attempt "
            "budget: give the same --attempts, or wait for it to end"
        ) from None
    except SessionTaken as e:
        also = (
            "several processes share a campaign only as evo worker"
            if mode == "run" and e.holder.get("mode") != "worker"
            else "evo worker joins only while no evo run runs it"
        )
        raise CampaignError(
            f"campaign {cfg.campaign!r} at {safe_url(cfg.storage)} is being run by {e}; "
            f"wait for it to end or stop it ({also}; a killed one elsewhere counts as stopped "
            f"{ledger.grace_s} s after its last heartbeat)"
        ) from None


def make_proposer(
    cfg: CampaignConfig,
    ideas: dict[str, Any],
    seed: int,
    tabu: Mapping[str, list[Any]],
    source_for: Callable[..., Any],
    out: Callable[[str], None],
) -> Any:
    """The config's proposer, wrapped in the idea layer (idea toggles, the knob search in the champion's idea
    context, the outside proposer; transparent where no idea is in play)."""
    from evo.search.outside import IdeaLayer

    inner = PROPOSERS[cfg.proposer.name](cfg.family, cfg.geometries, cfg.proposer.options, seed, tabu=tabu)
    inner.correctness_mode = cfg.gates.correctness.mode  # known from the config, not only from the verdicts
    return IdeaLayer(inner, cfg.family, cfg.geometries, ideas, cfg.ideas, seed, source_for, out)


def narrow(cfg: CampaignConfig, backend: Any) -> tuple[CampaignConfig, list[str]]:
    """A backend that measures only part of the knob space (a recorded sweep of a sub-space) narrows the search to
    it, so no proposal asks for a genome it cannot serve: the config searched, and what was narrowed (said once,
    before anything is proposed). The ledger's fingerprint stays the config's own: the same campaign may be replayed
    or resumed on a backend that measures another part of the space (a GPU, a larger sweep)."""
    space = getattr(backend, "knob_space", None)
    return narrow_to_recorded(cfg, space() if callable(space) else None)


def preflight(ledger: Any, given: CampaignConfig, backend: str, replaying: bool, ideas_changed: list[str]) -> None:
    """What refuses a resume, checked before anything is written: another campaign in the storage
    (``check_resume``), or a measured idea whose text changed (like a changed knob)."""
    check_resume(ledger, given, backend, replaying)
    if ideas_changed:
        raise CampaignError(
            f"idea(s) {', '.join(ideas_changed)} changed in {given.family.folder / 'ideas'} since campaign "
            f"{given.campaign!r} measured them; give the edited patch a new file name, or start a new campaign"
        )


def open_campaign(ledger: Any, meta: Callable[[], dict[str, Any]], out: Callable[[str], None]) -> None:
    """At set-up: attempts a stopped process left running recorded as interrupted, and a new campaign's meta
    (``meta()``) written in one transaction (a kill must not leave "config" without "backend"); of several workers
    starting at once exactly one writes it (create_meta, evo/loop/workers.py)."""
    from evo.core.hooks import crashed_trial
    from evo.loop.report_lines import resume_line

    crashed = crashed_trial()  # recorded as its crash (evo/run_child.py), not as interrupted
    interrupted = [n for n in ledger.recover() if n != crashed]
    if interrupted:
        out(resume_line(interrupted))
    if ledger.meta("config") is None:
        ledger.create_meta(meta())
