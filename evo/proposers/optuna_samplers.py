"""Optuna samplers as proposers: TPE, NSGA-II, or any ``optuna.samplers`` class.

| option | default | what it does |
|---|---|---|
| sampler | TPESampler | (``optuna`` only) the ``optuna.samplers`` class to wrap |
| sampler_options | {} | keyword arguments for the sampler (its ``seed`` is set from the campaign seed) |
| retries | 100 | asks per proposal before falling back to a random unseen genome |

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
fail (``_FailIndexedStorage``): the samplers only ever read trials by state
without FAIL (TPE: COMPLETE, PRUNED and RUNNING), yet Optuna's in-memory
storage and ``Study._get_trials`` scan every trial to filter them, and a
proposer whose sampler keeps asking for genomes that ``family.check`` rules out
fills its study with tens of thousands of FAIL trials (on mhc_prenorm_gemm one
TPE run made 25 000 asks for 426 proposals: 99.6% FAIL). The index returns the
same trials in the same order, so every sampler sees exactly what it would see
in a plain ``optuna.create_study``; only the cost of an ask no longer grows with
the failed asks. TPE (``_MemoTPESampler``) also keeps the two Parzen estimators
of its last ask and reuses them while the trials they were built from are the
same objects (a FAIL ask changes none of them): rebuilding them costs
O(finished trials) in Python per ask, and a TPE run that spends 100 asks per
proposal for 3000 proposals makes 300 000 of them. It draws from them exactly
as ``TPESampler._sample`` does, with the same generator.
tests/test_optuna_speed.py checks that the proposals are identical to those of
an unmodified ``TPESampler`` on a plain study.
"""

from __future__ import annotations

import copy
import math
import operator
from collections.abc import Container, Mapping, Sequence
from typing import Any, ClassVar

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.storages import InMemoryStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from evo.family import Family, Geometry
from evo.genome import Genome
from evo.proposers.base import Proposal, Proposer, check_range
from evo.records import Attempt

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _sampler_class(name: Any) -> type[optuna.samplers.BaseSampler]:
    cls = getattr(optuna.samplers, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, optuna.samplers.BaseSampler)) or name == "BaseSampler":
        known = sorted(
            n for n in dir(optuna.samplers) if n.endswith("Sampler") and n not in ("BaseSampler", "BaseGASampler")
        )
        raise ValueError(f"sampler: {name!r} is not an optuna sampler (known: {', '.join(known)})")
    return cls


def _excludes_fail(states: Container[TrialState] | None) -> bool:
    # (WAITING,) alone has its own fast path in InMemoryStorage: leave it to that.
    return states is not None and TrialState.FAIL not in states and tuple(states) != (TrialState.WAITING,)


class _FailIndexedStorage(InMemoryStorage):
    """InMemoryStorage that also keeps, per study, the numbers of the trials not in state FAIL (in order), so
    that ``get_all_trials(states=...)`` without FAIL costs O(trials that did not fail) instead of O(all)."""

    def __init__(self) -> None:
        super().__init__()
        self._unfailed: dict[int, list[int]] = {}

    def create_new_study(self, directions: Sequence[StudyDirection], study_name: str | None = None) -> int:
        with self._lock:
            study_id = super().create_new_study(directions, study_name)
            self._unfailed[study_id] = []
            return study_id

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        with self._lock:
            trial_id = super().create_new_trial(study_id, template_trial)
            trial = self._get_trial(trial_id)
            if trial.state != TrialState.FAIL:  # add_trial() can create a finished FAIL trial directly
                self._unfailed[study_id].append(trial.number)
            return trial_id

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        with self._lock:
            done = super().set_trial_state_values(trial_id, state, values)
            if done and state == TrialState.FAIL:
                study_id, number = self._trial_id_to_study_id_and_number[trial_id]
                numbers = self._unfailed[study_id]
                for i in range(len(numbers) - 1, -1, -1):  # the trial failing is nearly always the newest
                    if numbers[i] == number:
                        del numbers[i]
                        break
            return done

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        if not _excludes_fail(states):
            return super().get_all_trials(study_id, deepcopy, states)
        assert states is not None
        with self._lock:
            self._check_study_id(study_id)
            every = self._studies[study_id].trials
            trials = [t for t in (every[n] for n in self._unfailed[study_id]) if t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials


class _Study(optuna.Study):
    """A Study whose state-filtered trial reads go through the storage's index.

    ``Study._get_trials(use_cache=True)`` reads every trial once per ask and filters that list in Python on each
    call; with states that exclude FAIL the indexed read gives the same trials (within one ask only the trial
    being asked, which is RUNNING, changes, and a call that includes RUNNING is not cached by Optuna either)."""

    def _get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        if _excludes_fail(states) and isinstance(self._storage, _FailIndexedStorage):
            return self._storage.get_all_trials(self._study_id, deepcopy=deepcopy, states=states)
        return super()._get_trials(deepcopy, states, use_cache)


def _create_study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    """What ``optuna.create_study(direction="maximize", sampler=sampler)`` makes, on the indexed storage."""
    storage = _FailIndexedStorage()
    study_id = storage.create_new_study([StudyDirection.MAXIMIZE])
    return _Study(study_name=storage.get_study_name_from_id(study_id), storage=storage, sampler=sampler)


class _MemoTPESampler(optuna.samplers.TPESampler):
    """TPESampler that reuses its Parzen estimators while their input trials are unchanged.

    ``_sample`` builds both estimators from the finished (and, with constant_liar, running) trials, splits and
    encodes them in Python, then draws ``n_ei_candidates`` from the one below and keeps the best acquisition. The
    estimators are a deterministic function of those trials and the search space; InMemoryStorage replaces a
    trial's object whenever it changes, so the same objects in the same order (kept alive by the memo) mean the
    same estimators. On a miss the parent's ``_sample`` runs unchanged and its two estimators are kept; on a hit
    the draw is the parent's last four steps with the same generator."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._memo: tuple[list[FrozenTrial], dict[str, Any], Any, Any] | None = None
        self.memo_hits = 0  # asks served from the kept estimators

    def _model_trials(self, study: optuna.Study, trial: FrozenTrial) -> list[FrozenTrial]:
        # the trials TPESampler._sample reads (same states, same exclusion of the trial being asked)
        if self._constant_liar:
            states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        else:
            states = (TrialState.COMPLETE, TrialState.PRUNED)
        trials = study._get_trials(deepcopy=False, states=states, use_cache=not self._constant_liar)
        return [t for t in trials if t.number != trial.number] if self._constant_liar else trials

    def _sample(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        trials = self._model_trials(study, trial)
        memo = self._memo
        if (
            memo is not None
            and len(memo[0]) == len(trials)
            and all(map(operator.is_, memo[0], trials))
            and memo[1] == search_space
        ):
            _, _, below, above = memo
            self.memo_hits += 1
            samples = below.sample(self._rng.rng, self._n_ei_candidates)
            ret = optuna.samplers.TPESampler._compare(samples, self._compute_acquisition_func(samples, below, above))
            return {name: dist.to_external_repr(ret[name]) for name, dist in search_space.items()}
        built: list[Any] = []
        build = self._build_parzen_estimator

        def keep(*args: Any, **kwargs: Any) -> Any:
            built.append(build(*args, **kwargs))
            return built[-1]

        self._build_parzen_estimator = keep  # type: ignore[method-assign]
        try:
            ret = super()._sample(study, trial, search_space)
        finally:
            del self._build_parzen_estimator
        self._memo = (trials, dict(search_space), built[0], built[1]) if len(built) == 2 else None
        return ret


class OptunaSampler(Proposer):
    """Any Optuna sampler over the categorical knob space (``proposer: {name: optuna}``)."""

    SAMPLER: ClassVar[str] = "TPESampler"
    RETRIES: ClassVar[int] = 100  # the default of the retries option
    OPTIONS: ClassVar[dict[str, str]] = {
        "sampler": "optuna.samplers class name (TPESampler, NSGAIISampler, GPSampler, RandomSampler, ...)",
        "sampler_options": "keyword arguments for the sampler, a mapping (seed is set from the campaign seed)",
        "retries": "asks per proposal before a random unseen genome is used instead (1..10000, default 100)",
    }

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> None:
        check_range(options, "retries", 1, 10000, integer=True)
        sampler_cls = _sampler_class(options.get("sampler", cls.SAMPLER))
        kw = options.get("sampler_options", {})
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
        sampler = cls(**dict(self.options.get("sampler_options", {})), seed=self.rng.randrange(2**31))
        self.study = _create_study(sampler)
        self.distributions = {k.name: CategoricalDistribution(list(k.values)) for k in family.knobs}
        self.retries = int(self.options.get("retries", self.RETRIES))
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
        ok = all(v in self.distributions[n].choices for n, v in params.items())
        return params if ok else None

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
        return self.family.check(g, self.geometries)

    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        self._feed(attempts)
        dups = bad = 0
        for _ in range(self.retries):
            trial = self.study.ask(self.distributions)
            g = Genome(trial.params)
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
            return Proposal(g, f"{self.sampler_name} trial {trial.number}{note}")
        self.duplicates += dups
        self.invalid += bad
        g = self.random_unseen(seen)
        if g is None:
            return None
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
