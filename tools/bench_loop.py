"""The search benchmark's campaign as ``evo run`` deploys it (issue 42, item 1): the config, the proposer factory and
the compile-ahead lag.

tools/search_bench.py drives every evo-side strategy through :class:`BenchCampaign`, the campaign loop
(evo.loop.campaign.Campaign) with three seams set for a recorded sweep and nothing else changed:

* the config is the family's campaign config as ``evo run`` loads it (:func:`deployed_config`: ``load_config`` with
  ``--backend recorded``), with only the ledger (in memory), the budget, the seed, the end-of-run ceiling check and
  the peer timings replaced; the proposer section stays the config's for evo's row (its options: ``screen`` ...),
  and is replaced by a peer's name and options for a peer row;
* the proposer is made by the campaign's own factory (``Campaign.make_proposer``: the config's options, the
  correctness mode, the idea layer, the per-session seed), never by the bench; a bench-only peer
  (tools/bench_peers.py) is put in the proposer table for that one call, so it goes through the same factory;
* ``lag``: the compile-ahead of a GPU campaign (``worker.prefetch`` 1, its default on a GPU) proposes the next genome
  while the GPU measures this one, so every proposal but the first lags one result. ``lag=1`` runs the loop's own
  compile-ahead path with a prefetcher that compiles nothing (a recorded sweep needs no builds); ``lag=0`` is the
  loop without it (the recorded backend's default).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from evo.config import CampaignConfig, PeerConfig, WorkerConfig
from evo.loop.campaign import Campaign

LAGS = (0, 1)  # the compile-ahead lags the bench reports: 0 (off a GPU), 1 (evo run on a GPU: worker.prefetch 1)


class NoCompile:
    """A prefetcher that compiles nothing: the loop's compile-ahead path (propose the next genome before this one's
    result) on a sweep whose genomes need no build. Called by ``Campaign._compile_ahead``."""

    def submit(self, genome: Mapping[str, Any]) -> None:
        """(nothing to compile)"""

    def wait(self, genome: Mapping[str, Any], timeout: float = 0.0) -> float | None:
        return None

    def close(self) -> None:
        """(no processes)"""


def deployed_config(
    config_path: Path,
    *,
    family: Any,
    geometries: list[Any],
    budget: Any,
    seed: int,
    proposer: tuple[str, Mapping[str, Any]] | None = None,
    options: Mapping[str, Any] | None = None,
) -> CampaignConfig:
    """The campaign config ``evo run --backend recorded`` reads from ``config_path``, for one bench run.

    Replaced: the ledger (memory), ``budget``, ``seed``, the family and geometries (the sweep's sub-space, as the
    recorded backend narrows a campaign to it), the end-of-run ceiling check and the peer timings (nothing to
    quote), the worker (in-process; compile-ahead is the bench's ``lag``). ``proposer``: a peer's (name, options)
    in place of the config's; ``options``: the config's proposer with these options over its own (a held-out
    fold's).
    """
    from evo.config import ProposerConfig, load_config
    from evo.ledger.storage_url import MEMORY

    cfg = load_config(config_path, backend_override="recorded")  # (its storage is replaced: nothing is written)
    prop = cfg.proposer
    if proposer is not None:
        prop = ProposerConfig(proposer[0], dict(proposer[1]))
    elif options is not None:  # (a held-out fold's options over the config's: screen and the like stay)
        prop = ProposerConfig(prop.name, {**prop.options, **options})
    gates = dataclasses.replace(cfg.gates, perf=dataclasses.replace(cfg.gates.perf, ceiling_check=0))
    return dataclasses.replace(
        cfg,
        family=family,
        geometries=list(geometries),
        budget=budget,
        seed=seed,
        storage=MEMORY,
        proposer=prop,
        gates=gates,
        peer=PeerConfig(torch_compile="off"),
        worker=WorkerConfig(isolation="none", prefetch=0),
        # no finish (evo/loop/finish.py): it re-judges near misses with the perf gate's statistics, which the
        # noiseless objective gate stands in for here; the benchmark counts the proposer's evaluations
        search=dataclasses.replace(cfg.search, finish=dataclasses.replace(cfg.search.finish, enabled=False)),
    )


@contextlib.contextmanager
def registered(name: str, cls: Any) -> Iterator[None]:
    """``cls`` in evo's proposer table as ``name`` for the block (a bench-only peer made by the campaign's factory)."""
    from evo.search import PROPOSERS

    if name in PROPOSERS:
        yield
        return
    PROPOSERS.register(name, cls)
    try:
        yield
    finally:
        PROPOSERS.unregister(name)


class BenchCampaign(Campaign):
    """The campaign loop with the bench's compile-ahead ``lag`` and the proposer made by ``Campaign.make_proposer``.

    ``static_key``: given to a proposer that has that attribute (the surrogate; ``--static-key``: what a CPU
    compile tells, which ``evo run`` does not wire). ``made``: the proposer the factory made (read after the run).
    """

    def __init__(self, cfg: CampaignConfig, *, lag: int = 0, static_key: Callable[..., Any] | None = None, **kw):
        super().__init__(cfg, **kw)
        if lag not in LAGS:
            raise ValueError(f"lag: {lag} (the loop's compile-ahead lags one result or none: {LAGS})")
        self.lag = lag
        self.static_key = static_key
        self.made: Any = None

    def _prefetcher(self) -> Any:
        return NoCompile() if self.lag else None

    def make_proposer(self, n_before: int) -> Any:
        """``evo run``'s factory; a bench-only peer is resolved for the call (tools/bench_peers.py)."""
        from tools.bench_peers import BENCH_PROPOSERS

        name = self.cfg.proposer.name
        with registered(name, BENCH_PROPOSERS[name]) if name in BENCH_PROPOSERS else contextlib.nullcontext():
            self.made = super().make_proposer(n_before)
        inner = getattr(self.made, "inner", self.made)
        if self.static_key is not None and hasattr(inner, "static_key"):
            inner.static_key = self.static_key
        return self.made
