"""Optuna samplers as proposers: TPE, NSGA-II, or any ``optuna.samplers`` class.

Options: ``OptunaSampler.OPTIONS`` (listed in docs/config.md; ``tpe`` and ``nsga2`` take all but ``sampler``).

The sampler searches the family's knob space as categorical parameters, in an
in-memory study of its own that is fed every recorded attempt through
``tell()``: the attempt's score (weighted geometric-mean speedup over the
baseline) when it has one, FAIL otherwise. Attempts the sampler did not ask
for (the baseline, attempts from an earlier session) are added as finished
trials. A genome already tried is never returned: the sampler is told the
known score of such a duplicate and asked again; a genome that
``family.check`` or the campaign's tabu rules out is told as FAIL and asked
again. After ``retries`` asks without a new valid genome the proposal is a
random unseen genome, and its origin says so.

The study lives in an in-memory storage that indexes the trials that did not
fail (``FailIndexedStorage``; it and the TPE below live in evo/ledger/optuna_private.py, beside every other use of
Optuna's private API): the samplers only ever read trials by state
without FAIL (TPE: COMPLETE, PRUNED and RUNNING), yet Optuna's in-memory
storage and ``Study._get_trials`` scan every trial to filter them, and a
proposer whose sampler keeps asking for genomes that ``family.check`` rules out
fills its study with tens of thousands of FAIL trials (on mhc_prenorm_gemm one
TPE run made 25 000 asks for 426 proposals: 99.6% FAIL). The index returns the
same trials in the same order, so every sampler sees exactly what it would see
in a plain ``optuna.create_study``; only the cost of an ask no longer grows with
the failed asks. TPE (``MemoTPESampler``) also keeps the two Parzen estimators
of its last ask and reuses them while the trials they were built from are the
same objects (a FAIL ask changes none of them): rebuilding them costs
O(finished trials) in Python per ask, and a TPE run that spends 100 asks per
proposal for 3000 proposals makes 300 000 of them. It draws from them exactly
as ``TPESampler._sample`` does, with the same generator.
tests/test_optuna_speed.py checks that the proposals are identical to those of
an unmodified ``TPESampler`` on a plain study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import TrialState

from evo.core.family import Family, Geometry
from evo.core.genome import Genome
from evo.core.records import Attempt
from evo.ledger.optuna_private import MemoTPESampler as _MemoTPESampler
from evo.ledger.optuna_private import create_study as _create_study
from evo.search.base import Option, Proposal, Proposer

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _sampler_class(name: Any) -> type[optuna.samplers.BaseSampler]:
    cls = getattr(optuna.samplers, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, optuna.samplers.BaseSampler)) or name == "BaseSampler":
        known = sorted(
            n for n in dir(optuna.samplers) if n.endswith("Sampler") and n not in ("BaseSampler", "BaseGASampler")
        )
        raise ValueError(f"sampler: {name!r} is not an optuna sampler (known: {', '.join(known)})")
    return cls


class OptunaSampler(Proposer):
    """Any Optuna sampler over the categorical knob space (``proposer: {name: optuna}``)."""

    OPTIONS: ClassVar[dict[str, Option]] = {
        "sampler": Option(
            "TPESampler", "the optuna.samplers class to wrap (NSGAIISampler, GPSampler, RandomSampler...)"
        ),
        "sampler_options": Option({}, "keyword arguments for the sampler (its seed is set from the campaign seed)"),
        "retries": Option(100, "asks per proposal before falling back to a random unseen genome", 1, 10000),
    }
    SAMPLER: ClassVar[str] = OPTIONS["sampler"].default  # the sampler of this proposer (tpe, nsga2: theirs)
    LABEL: ClassVar[str] = ""  # after the sampler's name in each proposal's origin (a subclass's encoding)
    RETRIES: ClassVar[int] = OPTIONS["retries"].default  # read by tools/search_bench.py's tables

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> None:
        super().validate_options(options)
        sampler_cls = _sampler_class(options.get("sampler", cls.SAMPLER))
        kw = options.get("sampler_options", cls.OPTIONS["sampler_options"].default)
        if not isinstance(kw, Mapping):
            raise ValueError(f"sampler_options: expected a mapping of keyword arguments, got {kw!r}")
        if "seed" in kw:
            raise ValueError("sampler_options: seed is set from the campaign seed; leave it out")
        try:
            sampler_cls(**kw)
        except (TypeError, ValueError) as e:
            raise ValueError(f"sampler_options: {sampler_cls.__name__} does not take {dict(kw)!r} ({e})") from None

    def __init__(
        self,
        family: Family,
        geometries: Sequence[Geometry],
        options: Mapping[str, Any],
        seed: int,
        tabu: Mapping[str, Sequence[Any]] | None = None,
    ):
        super().__init__(family, geometries, options, seed, tabu)
        self.validate_options(self.options)
        self.sampler_name = self.options.get("sampler", self.SAMPLER)
        cls = _sampler_class(self.sampler_name)
        cls = _MemoTPESampler if cls is optuna.samplers.TPESampler else cls  # the same sampler, faster
        sampler = cls(**dict(self.opt("sampler_options")), seed=self.rng.randrange(2**31))  # type: ignore[call-arg]
        self.study = _create_study(sampler)
        self.distributions: dict[str, BaseDistribution] = {
            k.name: CategoricalDistribution(list(k.values)) for k in family.knobs
        }
        self.retries = int(self.opt("retries"))
        self._pending: dict[str, optuna.trial.Trial] = {}  # genome key -> asked trial awaiting its attempt
        self._fed: set[int] = set()  # attempt ids already told
        self._scores: dict[str, float | None] = {}  # genome key -> known score (None: failed)
        self.duplicates = 0  # sampler asks answered from known scores
        self.invalid = 0  # sampler asks ruled out by family.check or tabu
        self.fallbacks = 0  # proposals that had to be random

    # --- feeding the study ----------------------------------------------------
    @staticmethod
    def _value(score: float | None) -> tuple[TrialState, float | None]:
        if score is not None and math.isfinite(score):
            return TrialState.COMPLETE, float(score)
        return TrialState.FAIL, None

    def _params(self, genome: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            params = {n: genome[n] for n in self.distributions}
        except KeyError:
            return None
        ok = all(v in self.distributions[n].choices for n, v in params.items())  # type: ignore[attr-defined]
        return params if ok else None

    def _genome(self, params: Mapping[str, Any]) -> Genome:
        """A trial's parameters as a genome (the inverse of ``_params``; a subclass may encode knobs otherwise)."""
        return Genome(params)

    def _feed(self, attempts: Sequence[Attempt]) -> None:
        for a in attempts:
            if a.id in self._fed:
                continue
            self._fed.add(a.id)
            trial = self._pending.pop(a.genome_key, None)
            if a.verdict.kind == "interrupted":  # not judged: it may be proposed again
                if trial is not None:
                    self.study.tell(trial, state=TrialState.FAIL)
                continue
            self._scores[a.genome_key] = a.score
            state, value = self._value(a.score)
            if trial is not None:
                self.study.tell(trial, value, state=state)
                continue
            params = self._params(a.genome)
            if params is not None:
                self.study.add_trial(
                    optuna.trial.create_trial(
                        state=state,
                        value=value,
                        params=params,
                        distributions=self.distributions,
                        user_attrs={"attempt": a.id},
                    )
                )

    # --- proposing --------------------------------------------------------------
    def _why_invalid(self, g: Genome) -> str | None:
        for k, vals in self.tabu.items():
            if g[k] in vals:
                return f"tabu: {k}={g[k]!r}"
        from evo.core.hooks import check_genome

        return check_genome(self.family, g, self.geometries)

    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        self._feed(attempts)
        dups = bad = 0
        for _ in range(self.retries):
            trial = self.study.ask(self.distributions)
            g = self._genome(trial.params)
            if g.key in seen or g.key in self._pending:
                dups += 1
                trial.set_user_attr("duplicate", True)
                state, value = self._value(self._scores.get(g.key))
                self.study.tell(trial, value, state=state)
                continue
            why = self._why_invalid(g)
            if why is not None:
                bad += 1
                trial.set_user_attr("invalid", why)
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            self._pending[g.key] = trial
            self.duplicates += dups
            self.invalid += bad
            note = f", after {dups} repeat(s) and {bad} invalid ask(s)" if dups or bad else ""
            return Proposal(g, f"{self.sampler_name}{self.LABEL} trial {trial.number}{note}")
        self.duplicates += dups
        self.invalid += bad
        fallback = self.random_unseen(seen)
        if fallback is None:
            return None
        g = fallback
        self.fallbacks += 1
        return Proposal(
            g,
            f"random: {self.sampler_name} gave only tried or invalid genomes in {self.retries} asks "
            f"({dups} repeat(s), {bad} invalid)",
        )


class TPE(OptunaSampler):
    """Optuna's Tree-structured Parzen Estimator (``proposer: {name: tpe}``)."""

    SAMPLER = "TPESampler"
    OPTIONS = {k: v for k, v in OptunaSampler.OPTIONS.items() if k != "sampler"}

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> None:
        if "sampler" in options and options["sampler"] != cls.SAMPLER:
            raise ValueError(f"sampler: this proposer is {cls.SAMPLER}; use proposer name optuna for another")
        super().validate_options(options)


class NSGA2(TPE):
    """Optuna's NSGA-II genetic algorithm, single objective (``proposer: {name: nsga2}``)."""

    SAMPLER = "NSGAIISampler"
