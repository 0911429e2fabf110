"""A portfolio for the surrogate (issue 42 item 5, session 31): every k-th proposal from a model-free proposer, Optuna's
TPE, fed the same attempts (option ``portfolio``).

Why (docs/search-efficiency.md, "Portfolio (session 31)"): the surrogate loses where its model commits to the wrong
basin early and never measures the genome that would correct it. On pnpoly (three held-out caches, two GPUs on
which no run came within 2% of the best in 150 evaluations) the best genomes have ``use_method`` 0 and
``tile_size`` 20, the largest tile, whose speed jumps from 14 to 20 only with ``use_method`` 0 (0.76 -> 1.00 of the
best on the RTX 3090; with ``use_method`` 2 it peaks at 12-14), while the largest tiles and blocks are where a
third of the genomes fail. The model's first proposals (far corners: block 992, tile 20) fail, the per-knob failure
rate marks tile 20 as likely to fail, the runs settle on ``use_method`` 2 at 0.81 by their 15th attempt, and the
one ``use_method`` 0 genome they try (tile 14, 0.71) confirms the model's ranking. TPE, which keeps no trend and no
failure rate, but samples each knob's values by how often they appear among the best trials, reaches 2% on all
three pnpoly caches (ERT 48-96 against the shipped row's inf / inf / 236) and on the rare-best spaces where the
surrogate loses (convolution_A6000, dedispersion_W6600); it is far behind on the smooth ones, which is why it gets
only every k-th attempt, and none of the first ``portfolio_start``.

TPE here is the proposer ``tpe`` (``evo.search.optuna_samplers.TPE``) told a failed genome as measured at the
worst speed so far (evo/search/portfolio_tpe.py ``FailAwareTPE``; Optuna's TPE alone leaves failed trials out and
keeps sampling where genomes fail: on mhc_prenorm_gemm 33 of its 47 turns failed), seeded from the surrogate's seed
and fed every attempt (the surrogate's proposals as finished trials, its own as told trials). A TPE genome that the
campaign's exact correctness mode would reject (an inexact knob) is not proposed: the model's proposal is made
instead.

On by default since session 32 (``portfolio`` 3 from the 30th attempt; ``portfolio`` 0 turns it off, and a
``screen`` turns the default off). On the development caches (4 seeds; docs/search-efficiency.md, "Portfolio
(session 31)" and "Session 32: the default") it reached 2% where the search without it never did on pnpoly_RTX_3090,
pnpoly_RTX_3060_laptop and convolution_A100, was level on the smooth caches (nothing changes before the 30th
attempt), and cost pnpoly_RTX_Titan 2.25x on 4 seeds (1.08 on 8); on the third held-out list it reached 2% on both
pnpoly caches (0.95x and 0.74x the best peer). Called by
``Surrogate.propose`` once per proposal: :func:`turn`, which asks :func:`is_turn` and on a turn
:meth:`Portfolio.propose`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from evo.core.genome import Genome
from evo.core.records import Attempt
from evo.search.base import Option, Proposal, Proposer

if TYPE_CHECKING:  # imported at run time only when on: a surrogate without a portfolio never loads Optuna
    from optuna.trial import TrialState

    from evo.search.optuna_samplers import TPE

# on by default from the 30th attempt (session 32): docs/search-efficiency.md, "Portfolio (session 31)", has the numbers
OPTIONS = {
    "portfolio": Option(
        3,
        "every this many attempts, propose Optuna TPE's genome (fed every attempt, evo/search/portfolio.py) "
        "instead of the model's, so that a run whose model settles in the wrong basin still samples others "
        "(0: never; a screen turns the default off, and is refused with a portfolio set)",
        0,
        64,
    ),
    "portfolio_start": Option(
        30,
        "with portfolio: the first this many attempts are always the model's",
        0,
        1000,
    ),
}


def every(given: Callable[[str], object]) -> int:
    """The portfolio's period as it runs: the option, except that a screen turns the default off (TPE's turns would
    interrupt the screen of one-knob changes; a config that asks for both is refused by :func:`validate`)."""
    return 0 if given("screen") else int(given("portfolio"))  # type: ignore[call-overload]


def validate(given: Callable[[str], object], options: Mapping[str, object]) -> None:
    """The combinations that would not do what they say (``given(name)``: the option's value or default;
    ``options``: the ones the config sets)."""
    if options.get("portfolio") and given("screen"):  # TPE's turns would come before the screen's changes
        raise ValueError("portfolio: not with screen (TPE's turns would interrupt the screen of one-knob changes)")
    if "portfolio_start" in options and not every(given):  # (set, not merely different from the default)
        raise ValueError("portfolio_start: works only with portfolio above 0 and no screen (the portfolio is off here)")


def is_turn(every: int, start: int, attempts: Sequence[Attempt]) -> bool:
    """Whether this proposal is TPE's: every ``every``-th, counting the attempts made (interrupted ones not), once
    ``start`` were made (and never the first after the baseline); never when ``every`` is 0."""
    if every <= 0:
        return False
    done = sum(a.verdict.kind != "interrupted" for a in attempts)
    return done >= max(start, 1) and (done - start) % every == 0


class Model(Protocol):
    """What a turn asks of the surrogate (evo/search/surrogate.py; a protocol: the surrogate imports this module)."""

    correctness_mode: str | None

    def opt(self, name: str) -> int: ...
    def genome_of(self, code: Sequence[int]) -> Genome: ...
    def _data(self, attempts: Sequence[Attempt]) -> tuple[dict[tuple[int, ...], list[float]], object, object, str]: ...
    def _static_of(self, g: Genome) -> str | None: ...
    def _is_inexact(self, g: Genome) -> bool: ...


def turn(model: Model, half: Portfolio, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
    """TPE's proposal when this attempt is the portfolio's, else None (also where nothing was measured yet, or TPE's
    genome would be rejected before the GPU). Called by ``Surrogate.propose`` before the model proposes."""
    if not is_turn(every(model.opt), int(model.opt("portfolio_start")), attempts):
        return None
    scores, _, _, mode = model._data(attempts)
    mode = model.correctness_mode or mode
    if not scores:
        return None
    # the model's own rules before the GPU: no inexact knob in exact mode, no machine code already measured
    known = {d for d in (model._static_of(model.genome_of(c)) for c in scores) if d is not None}

    def rejected(g: Genome) -> bool:
        return (mode == "exact" and model._is_inexact(g)) or (bool(known) and model._static_of(g) in known)

    return half.propose(attempts, seen, rejected)


class Portfolio:
    """The model-free half of the portfolio: a TPE proposer made on its first turn, which catches up on every attempt
    it has not been told (evo/search/optuna_samplers.py ``OptunaSampler._feed``) whenever it is asked."""

    def __init__(self, owner: Proposer, seed: int):
        self.owner = owner
        self.seed = seed
        self._tpe: TPE | None = None

    def tpe(self) -> TPE:
        """The TPE proposer (made once; imported here so that a surrogate without a portfolio never loads Optuna)."""
        if self._tpe is None:
            from evo.search.portfolio_tpe import FailAwareTPE

            o = self.owner
            tabu = {k: sorted(v, key=repr) for k, v in o.tabu.items()}
            self._tpe = FailAwareTPE(o.family, o.geometries, {}, self.seed, tabu)
        return self._tpe

    def propose(
        self, attempts: Sequence[Attempt], seen: set[str], rejected: Callable[[Genome], bool]
    ) -> Proposal | None:
        """TPE's proposal, or None where it has none or the campaign would reject it before the GPU (``rejected``:
        then TPE is told it failed, so that it does not wait for it)."""
        tpe = self.tpe()
        p = tpe.propose(attempts, seen)
        if p is None:
            return None
        if rejected(p.genome):
            trial = tpe._pending.pop(p.genome.key, None)
            if trial is not None:  # a random fallback has no trial
                tpe.study.tell(trial, state=_fail())
            return None
        return Proposal(p.genome, f"portfolio: {p.origin}")


def _fail() -> TrialState:
    from optuna.trial import TrialState

    return TrialState.FAIL
