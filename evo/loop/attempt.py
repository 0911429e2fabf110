"""A new attempt record, as the loop starts one (the baseline's at set-up, each proposal's in ``evaluate``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from evo.core.records import Attempt
from evo.core.variant import LaunchError
from evo.loop.errors import CampaignError
from evo.search import Proposal


def now() -> str:
    """The time an attempt or a session entry is stamped with (UTC, seconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_attempt(
    number: int,
    prop: Proposal,
    built: Any,
    cfg: Any,
    backend_name: str,
    parent: Attempt | None,
    launch_sha256: Callable[[Any], str],
) -> Attempt:
    """Attempt ``number`` of ``prop``, started now against ``parent`` (the champion). ``built``: the baseline's build,
    whose hashes and resources go in at once (a candidate's are filled in by the gates)."""
    a = Attempt(
        id=number,
        campaign=cfg.campaign,
        family=cfg.family.name,
        genome=dict(prop.genome),
        genome_key=prop.genome.key,
        origin=prop.origin,
        derived_from=list(prop.derived_from),
        finish=getattr(prop, "finish", None),  # the finish's tag (evo/loop/finish.py)
        parent_id=parent.id if parent else None,
        backend=backend_name,
        started_at=now(),
    )
    if built is not None:  # the baseline's: its launch() runs on every measurement, an error ends the run there
        a.source_sha256, a.cubin_sha256, a.sass_sha256 = built.source_sha256, built.cubin_sha256, built.sass_sha256
        a.resources = {k: m.resources for k, m in built.modules.items()}
        a.compile_s = round(built.compile_s, 3)
        try:
            a.launch_sha256 = launch_sha256(prop.genome)
        except LaunchError as e:
            raise CampaignError(f"the baseline: {e}") from None
    return a
