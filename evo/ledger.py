"""The attempt ledger: one Optuna study per campaign, one trial per attempt.

Optuna's RDB storage gives us crash-safe persistence, resumption and (later)
PostgreSQL sharing for free; each trial carries its full :class:`Attempt` as a
JSON user attribute, so the ledger is readable without our own schema.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from evo.family import Knob
from evo.genome import Genome
from evo.records import ACCEPTED, BASELINE, Attempt, Verdict

optuna.logging.set_verbosity(optuna.logging.WARNING)

ATTEMPT_ATTR = "attempt"
INTERRUPTED_REASON = (
    "the campaign process stopped while this attempt was running; it will be proposed again"
)


def _storage(url: str) -> optuna.storages.RDBStorage:
    """RDB storage; for SQLite, create the folder and wait on locks instead of failing."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})
    return optuna.storages.RDBStorage(url)


def _final_state(attempt: Attempt) -> tuple[TrialState, float | None]:
    """COMPLETE with the score when there is a finite one; FAIL otherwise (the sampler skips it)."""
    if attempt.score is not None and math.isfinite(attempt.score):
        return TrialState.COMPLETE, float(attempt.score)
    return TrialState.FAIL, None


class Ledger:
    """All attempts of one campaign, stored as trials of the Optuna study named after it."""

    def __init__(self, storage_url: str, campaign: str, knobs: Sequence[Knob],
                 sampler: optuna.samplers.BaseSampler | None = None):
        self.storage_url = storage_url
        self.campaign = campaign
        self.study: optuna.Study = optuna.create_study(
            storage=_storage(storage_url), study_name=campaign, direction="maximize",
            sampler=sampler, load_if_exists=True,
        )
        self.distributions: dict[str, CategoricalDistribution] = {
            k.name: CategoricalDistribution(list(k.values)) for k in knobs
        }

    # --- campaign metadata (study user attrs) ---------------------------
    def meta(self, key: str, default: Any = None) -> Any:
        return self.study.user_attrs.get(key, default)

    def set_meta(self, key: str, value: Any) -> None:
        self.study.set_user_attr(key, value)

    def all_meta(self) -> dict[str, Any]:
        """Every meta key at once (what the log renderer takes)."""
        return dict(self.study.user_attrs)

    # --- asking and recording -------------------------------------------
    def ask(self, fixed: Mapping[str, Any] | None = None) -> optuna.trial.Trial:
        """A new trial: exactly ``fixed`` when given, else whatever the sampler proposes."""
        if fixed is not None:
            self.study.enqueue_trial(dict(fixed))
        return self.study.ask(self.distributions)

    def record(self, trial: optuna.trial.Trial, attempt: Attempt) -> None:
        """Store the attempt on its trial, then finish the trial (COMPLETE with score, else FAIL)."""
        if attempt.id != trial.number:
            attempt.id = trial.number
        self._write_attrs(trial._trial_id, attempt)
        state, value = _final_state(attempt)
        self.study.tell(trial, value, state=state)

    def _write_attrs(self, trial_id: int, attempt: Attempt) -> None:
        st = self.study._storage
        # The short attrs first: a process killed between writes leaves no "attempt",
        # so recover() treats the trial as interrupted rather than half-recorded.
        st.set_trial_user_attr(trial_id, "verdict", attempt.verdict.label())
        st.set_trial_user_attr(trial_id, "genome_key", attempt.genome_key)
        st.set_trial_user_attr(trial_id, ATTEMPT_ATTR, attempt.to_json())

    # --- reading -----------------------------------------------------------
    def _trials(self, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=tuple(states) if states else None)

    def attempts(self) -> list[Attempt]:
        """Every recorded attempt, ordered by id (= trial number)."""
        out = [Attempt.from_json(t.user_attrs[ATTEMPT_ATTR]) for t in self._trials()
               if ATTEMPT_ATTR in t.user_attrs]
        return sorted(out, key=lambda a: a.id)

    def seen_keys(self) -> set[str]:
        """Genomes already judged; interrupted ones are left out so they get proposed again."""
        return {
            t.user_attrs["genome_key"] for t in self._trials()
            if ATTEMPT_ATTR in t.user_attrs and "genome_key" in t.user_attrs
            and t.user_attrs.get("verdict") != "error: interrupted"
        }

    def champion(self) -> Attempt | None:
        """The newest accepted attempt, else the baseline, else None."""
        atts = self.attempts()
        for a in reversed(atts):
            if a.verdict.status == ACCEPTED:
                return a
        return next((a for a in atts if a.verdict.status == BASELINE), None)

    # --- crash recovery ----------------------------------------------------
    def recover(self) -> list[int]:
        """Finish trials a killed process left RUNNING; return their numbers.

        Only call this while no other process works on the campaign: a RUNNING
        trial of a live worker would be closed too. Trials enqueued but never
        asked (WAITING) are failed silently, so a later ``ask(fixed)`` gets its own.
        """
        handled: list[int] = []
        for t in self._trials([TrialState.RUNNING]):
            if ATTEMPT_ATTR in t.user_attrs:
                attempt = Attempt.from_json(t.user_attrs[ATTEMPT_ATTR])
            else:
                attempt = self._interrupted(t)
                self._write_attrs(t._trial_id, attempt)
            self._finish(t, *_final_state(attempt))
            handled.append(t.number)
        for t in self._trials([TrialState.WAITING]):
            self.study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        return handled

    def _interrupted(self, t: FrozenTrial) -> Attempt:
        config = self.meta("config") or {}
        genome = Genome(t.params)
        return Attempt(
            id=t.number,
            campaign=config.get("campaign", self.campaign),
            family=config.get("family", ""),
            genome=dict(genome),
            genome_key=genome.key,
            backend=self.meta("backend") or config.get("backend") or "gpu",
            verdict=Verdict.error("interrupted", INTERRUPTED_REASON),
            started_at=t.datetime_start.isoformat() if t.datetime_start else "",
        )

    def _finish(self, t: FrozenTrial, state: TrialState, value: float | None) -> None:
        try:
            self.study.tell(t.number, value, state=state)
        except (ValueError, RuntimeError):
            self.study._storage.set_trial_state_values(
                t._trial_id, state, None if value is None else [value])
