"""The campaign's key records, verified on every open of its ledger (:func:`audit`, called by ``Ledger.__init__``).

A damaged key record must stop every command rather than change what it says: without its baseline a run would
measure a second one and move ``baseline_id``; without its champion status and export would present the previous
step as champion and a run would accept it again; with every record unreadable a run would start the campaign
over inside the ledger. So, read from the rows themselves (no Optuna parsing, which raises on one bad row):

* the campaign meta evo cannot go on without (``config``, ``backend``, ``baseline_id``, ``baseline_hashes``,
  ``baseline_errors``): JSON of the right type, else refused;
* the baseline (the trial numbered ``baseline_id``) and the champion (the newest trial whose ``verdict`` attr says
  accepted, or one whose verdict is unreadable but whose stored value is the best): a whole attempt record that
  names itself, in a trial Optuna can read, else refused;
* at least one readable attempt record where trials hold some;
* each attempt number held by one trial only: a writer is refused, a reader is told.

Refusals are one line (:class:`LedgerError`) naming the record and the repair; nothing is written. Damaged
ordinary rows are the readers' to skip with a count (``Ledger.damaged``); other meta records that are not JSON are
skipped by ``Ledger.meta`` with a count too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy
from optuna.trial import TrialState

from evo.core.records import ACCEPTED, BASELINE, Attempt
from evo.ledger.errors import LedgerError
from evo.ledger.sqlite_file import REPAIR

NOTHING = "nothing was written"
_STATES = frozenset(s.name for s in TrialState)  # a RUNNING one holding its attempt is recover()'s to finish


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _str_values(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _number_values(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) or x is None for x in v.values()
    )


# meta key -> (what it must be, the check)
KEY_META: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "config": ("a mapping", _is_dict),
    "backend": ("a name", lambda v: isinstance(v, str)),
    "baseline_id": ("an attempt number", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "baseline_hashes": ("a mapping of output hashes", _str_values),
    "baseline_errors": ("a mapping of errors", _number_values),
}


@dataclass
class Audit:
    """What :func:`audit` found that readers skip and report (the refusals were raised)."""

    damaged_meta: dict[str, str] = field(default_factory=dict)  # meta key -> why it was skipped
    duplicates: dict[int, list[int]] = field(default_factory=dict)  # attempt number -> trial ids holding it

    def note(self) -> str | None:
        """One clause on duplicated numbers, or None."""
        if not self.duplicates:
            return None
        n = min(self.duplicates)
        return f"{_dup_text(n, self.duplicates[n])}: only its first is read" + (
            f" (and {len(self.duplicates) - 1} more number(s) so)" if len(self.duplicates) > 1 else ""
        )


def _dup_text(number: int, ids: list[int]) -> str:
    held = ", ".join(map(str, ids))
    return f"attempt number #{number} is held by {len(ids)} trials (ids {held}), a number given twice"


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:100]}"


def _loads(text: Any) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except (TypeError, ValueError) as e:
        return None, _why(e)


def audit(session: Any, study_id: int, where: str, readonly: bool, read_trial: Callable[[int], Any]) -> Audit:
    """Verify the study's key records (see the module docstring); raise LedgerError, else return what to report.

    ``where``: the ledger as the user names it; ``read_trial(trial_id)``: Optuna's read of one trial (raises on a
    row it cannot parse)."""
    found = Audit()
    meta = _check_meta(session, study_id, where, found)
    trials = session.execute(
        sqlalchemy.text("SELECT trial_id, number, state FROM trials WHERE study_id = :s ORDER BY number, trial_id"),
        {"s": study_id},
    ).all()
    if not trials:
        return found
    by_number: dict[int, list[int]] = defaultdict(list)
    for tid, number, _ in trials:
        by_number[number].append(tid)
    found.duplicates = {n: ids for n, ids in by_number.items() if len(ids) > 1}
    if found.duplicates and not readonly:
        n = min(found.duplicates)
        raise LedgerError(
            f"{where}: {_dup_text(n, found.duplicates[n])}; the ledger was edited or damaged and a run could "
            f"measure a genome twice: {REPAIR} ({NOTHING})"
        )
    attrs = _trial_attrs(session, study_id)
    values = dict(
        session.execute(
            sqlalchemy.text(
                "SELECT v.trial_id, v.value FROM trial_values v JOIN trials t ON t.trial_id = v.trial_id "
                "WHERE t.study_id = :s AND v.objective = 0"
            ),
            {"s": study_id},
        ).all()
    )
    state = {tid: str(st) for tid, _, st in trials}
    number = {tid: n for tid, n, _ in trials}

    def check(tid: int, what: str) -> None:
        """Refuse unless trial ``tid`` holds a whole attempt record of its own number in a trial Optuna reads."""
        n = number[tid]
        why = _attempt_problem(attrs.get(tid, {}).get("attempt"), n, state[tid])
        if why is None:
            try:
                read_trial(tid)
            except Exception as e:  # a param, distribution or state Optuna cannot parse
                why = _why(e)
        if why is not None:
            raise LedgerError(f"{where}: the {what}'s record (attempt #{n}) is damaged ({why}); {REPAIR} ({NOTHING})")

    base = meta.get("baseline_id")
    if base is not None:
        ids = by_number.get(base)
        if not ids:
            raise LedgerError(
                f"{where}: the baseline's record (attempt #{base}, meta 'baseline_id') is missing; {REPAIR} ({NOTHING})"
            )
        check(ids[0], "baseline")
    verdicts = {tid: _loads(a.get("verdict"))[0] if "verdict" in a else None for tid, a in attrs.items()}
    champions = [tid for tid, v in verdicts.items() if v in (ACCEPTED, BASELINE)]
    newest = max((t for t in champions if verdicts[t] == ACCEPTED), key=lambda t: number[t], default=None)
    if newest is not None:
        check(newest, "champion")
    best = max((values[t] for t in champions if values.get(t) is not None), default=None)
    for tid, a in attrs.items():  # a verdict unreadable: the stored value tells whether it was the champion
        v = verdicts[tid]
        if not isinstance(v, str) and "attempt" in a and state[tid] == "COMPLETE" and tid in values:
            if best is None or (values[tid] is not None and values[tid] > best):
                check(tid, "champion")
    recorded = [tid for tid, a in attrs.items() if "attempt" in a]
    if recorded and all(_attempt_problem(attrs[t]["attempt"], number[t], None) for t in recorded):
        raise LedgerError(
            f"{where}: every one of its {len(recorded)} attempt records is damaged (the campaign would start over "
            f"inside it); {REPAIR} ({NOTHING})"
        )
    return found


def _check_meta(session: Any, study_id: int, where: str, found: Audit) -> dict[str, Any]:
    """The study's meta, parsed; a damaged key record refused, another one noted in ``found.damaged_meta``."""
    rows = session.execute(
        sqlalchemy.text("SELECT key, value_json FROM study_user_attributes WHERE study_id = :s"), {"s": study_id}
    ).all()
    out: dict[str, Any] = {}
    for key, text in rows:
        value, why = _loads(text)
        rule = KEY_META.get(key)
        if why is None and rule is not None and not rule[1](value):
            why = f"not {rule[0]}: {type(value).__name__}"
        if why is None:
            out[key] = value
        elif rule is not None:
            raise LedgerError(f"{where}: the campaign meta {key!r} is damaged ({why}); {REPAIR} ({NOTHING})")
        else:
            found.damaged_meta[key] = why
    return out


def _trial_attrs(session: Any, study_id: int) -> dict[int, dict[str, Any]]:
    """Trial id -> its raw ``attempt`` and ``verdict`` user attrs (JSON text, unparsed)."""
    rows = session.execute(
        sqlalchemy.text(
            "SELECT u.trial_id, u.key, u.value_json FROM trial_user_attributes u JOIN trials t "
            "ON t.trial_id = u.trial_id WHERE t.study_id = :s AND u.key IN ('attempt', 'verdict')"
        ),
        {"s": study_id},
    ).all()
    out: dict[int, dict[str, Any]] = defaultdict(dict)
    for tid, key, text in rows:
        out[tid][key] = text
    return out


def _attempt_problem(text: Any, number: int, state: str | None) -> str | None:
    """Why an attempt attr's text is not a whole attempt record of attempt ``number`` (``state``: its trial's, where
    it must be one of Optuna's), or None."""
    if text is None:
        return "no attempt record"
    if state is not None and state not in _STATES:
        return f"its trial's state is {state[:20]!r}"
    raw, why = _loads(text)
    if why is not None:
        return why
    try:
        a = Attempt.from_json(raw)
    except Exception as e:  # any damage inside: the record is not whole
        return _why(e)
    if a.id != number:
        return f"it names attempt #{a.id}"
    return None


def skip_damaged(attrs: Mapping[str, Any], found: Audit) -> dict[str, Any]:
    """The meta ``attrs`` without the records :func:`audit` found damaged."""
    return {k: v for k, v in attrs.items() if k not in found.damaged_meta}
