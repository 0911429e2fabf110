"""Optuna's private API is used in evo/ledger/optuna_private.py only (the names it lists, by the AST; any private
name the installed optuna defines, by a scan of the product tree's code), and every private name used there exists
in the installed optuna and does what the adapter relies on: an Optuna upgrade that moves one fails here, by name.

The indexed study and the memoizing TPE are held to a plain study and an unmodified TPESampler proposal by
proposal in tests/test_optuna_speed.py; the ledger's whole use of the adapter in tests/test_ledger.py and
tests/test_kill_resume.py."""

from __future__ import annotations

import ast
import datetime as dt
import importlib
import io
import re
import tokenize
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from evo.ledger import optuna_private as op

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = ROOT / "evo" / "ledger" / "optuna_private.py"
SCANNED = ("evo", "harness", "gates", "tools", "candidates")
PRIVATE_ATTRS = {name for _, name in op.PRIVATE_NAMES}


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, Any]:
    """One live object of each class whose instance attributes the adapter reads."""
    url = f"sqlite:///{tmp_path_factory.mktemp('optuna') / 'o.db'}"
    study = optuna.create_study(storage=url, study_name="contract", sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask({"x": CategoricalDistribution([1, 2])})
    study.tell(trial, 1.0)
    return {
        "optuna.Study": study,
        "optuna.storages._CachedStorage": study._storage,
        "optuna.trial.Trial": study.ask(),
        "optuna.trial.FrozenTrial": study.trials[0],
        "optuna.storages.InMemoryStorage": optuna.storages.InMemoryStorage(),
        "optuna.samplers.TPESampler": optuna.samplers.TPESampler(seed=0),
    }


@pytest.mark.parametrize("where, name", op.PRIVATE_NAMES, ids=[f"{w}:{n}" for w, n in op.PRIVATE_NAMES])
def test_every_private_name_exists_in_the_installed_optuna(live, where, name):
    if where.endswith(" instance"):
        obj = live[where.removesuffix(" instance")]
    else:
        obj = _resolve(where)
    assert hasattr(obj, name), (
        f"optuna {optuna.__version__}: {where} has no {name} (evo/ledger/optuna_private.py uses it)"
    )


def _private_uses(tree: ast.AST) -> set[str]:
    """Private attribute names and private module components a module's code (not its docstrings) uses."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "optuna":
            out |= {p for p in node.module.split(".") if p.startswith("_")}
            out |= {a.name for a in node.names if a.name.startswith("_")}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "optuna":
                    out |= {p for p in a.name.split(".") if p.startswith("_")}
    return out


def _own_names(tree: ast.AST) -> set[str]:
    """Names a module defines itself: its functions, methods and classes, and attributes it assigns on self."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                own.add(node.attr)
    return own


def test_the_adapter_lists_every_private_name_it_uses():
    tree = ast.parse(ADAPTER.read_text())
    unlisted = _private_uses(tree) - PRIVATE_ATTRS - _own_names(tree)
    assert not unlisted, f"evo/ledger/optuna_private.py uses {sorted(unlisted)}: add them to PRIVATE_NAMES"


def test_no_other_module_touches_optunas_private_api():
    """No optuna module with a private component is imported, and no private name the adapter lists is read,
    outside the adapter (a module's own attributes of the same name, e.g. a Ledger's ``_lock``, are its own)."""
    offenders = []
    for top in SCANNED:
        for f in sorted((ROOT / top).rglob("*.py")):
            if f == ADAPTER or "templates" in f.parts:
                continue
            tree = ast.parse(f.read_text(), str(f))
            text_imports = {
                n.module
                for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("optuna")
            }
            bad = {m for m in text_imports if any(p.startswith("_") for p in m.split("."))}
            bad |= (_private_uses(tree) & PRIVATE_ATTRS) - _own_names(tree)
            if bad:
                offenders.append(f"{f.relative_to(ROOT)}: {sorted(bad)}")
    assert not offenders, "Optuna's private API outside evo/ledger/optuna_private.py:\n" + "\n".join(offenders)


def test_the_scan_would_catch_a_private_use():
    code = "from optuna.storages._rdb import models\ndef f(study):\n    return study._study_id, t._suggest\n"
    assert {"_rdb", "_study_id", "_suggest"} <= _private_uses(ast.parse(code)) & PRIVATE_ATTRS


def test_the_ledger_helpers_read_and_write_trials_as_optuna_does(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    study = optuna.create_study(storage=url, study_name="s", sampler=optuna.samplers.RandomSampler(seed=0))
    rdb = op.rdb_storage(study)
    assert isinstance(rdb, optuna.storages.RDBStorage)
    sid = op.study_id(study)
    assert sid == rdb.get_study_id_from_name("s")

    trial = study.ask()
    x = op.suggest(trial, "x", CategoricalDistribution([1, 2]))
    tid = op.trial_id(trial)
    assert x in (1, 2) and tid == rdb.get_trial_id_from_study_id_trial_number(sid, 0)
    assert op.asked_trial(study, trial).params == {"x": x}
    assert op.trial_id(study.trials[0]) == tid

    with op.scoped_session(rdb) as session:
        row = op.models.TrialModel.find_or_raise_by_id(tid, session)
        op.set_trial_value(rdb, session, row, 0, 1.5)
        t = op.models.TrialModel
        session.query(t).filter(t.trial_id == tid).update(
            {t.state: TrialState.COMPLETE, op.TRIAL_COMPLETE_UTC: dt.datetime(2026, 1, 2, 3, 4, 5)},
            synchronize_session=False,
        )
    second = study.ask()
    with op.scoped_session(rdb) as session:
        op.set_trial_param(rdb, session, op.trial_id(second), "y", 0.0, CategoricalDistribution(["a"]), None)
    op.forget_cached_trials(study)
    first, other = study.trials
    assert first.state == TrialState.COMPLETE and first.value == 1.5
    assert first.datetime_complete == dt.datetime(2026, 1, 2, 3, 4, 5)
    assert other.params == {"y": "a"} and other.state == TrialState.RUNNING


def test_stale_trial_ids_are_the_running_trials_past_their_heartbeat(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    rdb = optuna.storages.RDBStorage(url, heartbeat_interval=60, grace_period=120)
    study = optuna.create_study(storage=rdb, study_name="h")
    old, fresh = study.ask(), study.ask()
    for t in (old, fresh):
        rdb.record_heartbeat(op.trial_id(t))
    with op.scoped_session(rdb) as session:
        hb = op.models.TrialHeartbeatModel
        session.query(hb).filter(hb.trial_id == op.trial_id(old)).update(
            {hb.heartbeat: dt.datetime(2000, 1, 1)}, synchronize_session=False
        )
    assert op.stale_trial_ids(rdb, op.study_id(study)) == [op.trial_id(old)]


# --- every private name of the installed optuna, not only the listed ones ----------------------------------------
_DEFINES = (
    re.compile(r"\bdef (_[A-Za-z]\w*)"),
    re.compile(r"\bclass (_[A-Za-z]\w*)"),
    re.compile(r"\bself\.(_[A-Za-z]\w*)\s*(?::[^=\n]*)?="),
    re.compile(r"^\s*(_[A-Za-z]\w*)\s*(?::[^=\n]*)?=", re.M),
)


def _defined(text: str) -> set[str]:
    """Private names a source text defines: functions, classes, attributes set on self, assigned names."""
    return {name for rx in _DEFINES for name in rx.findall(text)}


def _attribute_uses(text: str) -> set[str]:
    """Private names read as attributes (``x._name``) in code: strings (docstrings) and comments are skipped."""
    out: set[str] = set()
    prev = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and prev is not None and prev.type == tokenize.OP and prev.string == ".":
            if tok.string.startswith("_") and not tok.string.startswith("__"):
                out.add(tok.string)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            prev = tok
    return out


def _product_files() -> list[Path]:
    return [f for top in SCANNED for f in sorted((ROOT / top).rglob("*.py")) if "templates" not in f.parts]


@pytest.fixture(scope="module")
def optunas_private_names() -> set[str]:
    """Every private name the installed optuna defines that evo's own code never defines (a name both define, like
    ``_lock``, is left to the listed-names test above)."""
    theirs = set().union(*(_defined(f.read_text()) for f in Path(optuna.__file__).parent.rglob("*.py")))
    ours = set().union(*(_defined(f.read_text()) for f in _product_files()))
    return theirs - ours


def test_no_private_name_of_the_installed_optuna_outside_the_adapter(optunas_private_names):
    """A scan of the product tree's code for any private name of Optuna's, listed in PRIVATE_NAMES or not: an
    unlisted one (``rdb._set_trial_intermediate_value_without_commit`` once sat in the ledger) is caught too."""
    offenders = []
    for f in _product_files():
        if f == ADAPTER:
            continue
        bad = _attribute_uses(f.read_text()) & optunas_private_names
        if bad:
            offenders.append(f"{f.relative_to(ROOT)}: {sorted(bad)}")
    assert not offenders, "Optuna's private API outside evo/ledger/optuna_private.py:\n" + "\n".join(offenders)
    assert _attribute_uses(ADAPTER.read_text()) & optunas_private_names  # the scan sees what the adapter does


def test_the_scan_finds_an_unlisted_private_call_in_code_only(optunas_private_names):
    code = (
        '"""Docs may name ``Study._get_trials``."""\n'
        "def f(rdb, session, t):\n"
        "    # rdb._get_stale_trial_ids in a comment is no use\n"
        "    rdb._set_trial_intermediate_value_without_commit(session, t, 0, 1.0)\n"
    )
    assert _attribute_uses(code) & optunas_private_names == {"_set_trial_intermediate_value_without_commit"}
