"""The storage seam: a storage is chosen in one place by its URL (evo/ledger/storage.py ``open_ledger``), and storage
URLs are read in one module (evo/ledger/storage_url.py); no other product module builds a ledger or parses a URL."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from evo.core.family import load_family
from evo.core.protocols import Storage
from evo.ledger.errors import LedgerError
from evo.ledger.ledger import Ledger
from evo.ledger.memory_ledger import MemoryLedger
from evo.ledger.storage import open_ledger
from evo.ledger.storage_url import MEMORY, is_memory_url, is_rdb_url, safe_url, sqlite_url, where

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("evo", "harness", "gates", "tools", "candidates")
LEDGER_PKG = ROOT / "evo" / "ledger"
FAM = load_family("mhc_pre_big_fuse")
# A ledger built by hand, a URL's scheme compared or cut off by hand, SQLAlchemy's URL parser called by hand.
BUILDS = re.compile(r"\b(?:Memory|Side)?Ledger\s*\(")
SCHEMES = {"sqlite", "sqlite://", "sqlite:///", "postgresql", "postgresql://", "mysql://", "memory", "memory:"}


def _code(text: str) -> tuple[str, list[str]]:
    """(the code with every string and comment blanked, the string literals' values)."""
    code, strings = [], []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING:
            strings.append(tok.string.strip("\"'rbfu"))
            code.append('""')
        elif tok.type != tokenize.COMMENT:
            code.append(tok.string)
    return " ".join(code), strings


def _offenders(f: Path) -> list[str]:
    code, strings = _code(f.read_text())
    bad = []
    if not f.is_relative_to(LEDGER_PKG):
        bad += [f"builds {m.group(0).replace(' ', '')}" for m in BUILDS.finditer(code)]
    if f.name != "storage_url.py":
        bad += [f"URL scheme {s!r}" for s in strings if s in SCHEMES]
        bad += ["make_url"] if re.search(r"\bmake_url\b", code) else []
    return bad


def test_one_place_builds_a_storage_and_one_reads_its_url():
    offenders = []
    for top in PRODUCT:
        for f in sorted((ROOT / top).rglob("*.py")):
            if "templates" not in f.parts:
                offenders += [f"{f.relative_to(ROOT)}: {b}" for b in _offenders(f)]
    assert not offenders, "a storage built or a URL parsed outside evo/ledger:\n" + "\n".join(offenders)


def test_the_scan_catches_a_hand_built_ledger_and_a_hand_parsed_url(tmp_path):
    f = tmp_path / "cli.py"
    f.write_text(
        '"""Opens Ledger(url) -- in a docstring: fine."""\n'
        "def f(cfg):\n"
        '    raw = cfg.storage[len("sqlite:///") :]\n'
        "    return Ledger(cfg.storage, cfg.campaign, [])\n"
    )
    assert _offenders(f) == ["builds Ledger(", "URL scheme 'sqlite:///'"]


def test_memory_url_is_a_memory_ledger():
    st = open_ledger(MEMORY, "c", FAM.knobs)
    assert isinstance(st, MemoryLedger) and isinstance(st, Storage) and not st.claimed
    assert is_memory_url("memory:") and is_memory_url("memory://x") and not is_rdb_url("memory:")
    with pytest.raises(LedgerError, match="nothing to read"):
        open_ledger(MEMORY, "c", FAM.knobs, readonly=True)
    with pytest.raises(LedgerError, match="workers cannot share it"):
        open_ledger(MEMORY, "c", FAM.knobs, shared=True, limit=3)


def test_a_database_url_is_an_optuna_ledger(tmp_path):
    url = sqlite_url(tmp_path / "a b?" / "ledger.db")  # quoted: the folder's name is read back as it is
    with pytest.raises(LedgerError, match="no ledger at"):
        open_ledger(url, "c", FAM.knobs, readonly=True)  # a reader never creates one
    led = open_ledger(url, "c", FAM.knobs, shared=True, limit=7)
    assert isinstance(led, Ledger) and isinstance(led, Storage) and led.shared and led.limit == 7
    assert (tmp_path / "a b?" / "ledger.db").is_file() and where(url) == str(tmp_path / "a b?" / "ledger.db")
    assert not led.claimed
    led.claim("run")
    assert led.claimed
    led.release()
    assert not led.claimed
    reader = open_ledger(url, "c", FAM.knobs, readonly=True)
    assert isinstance(reader, Ledger) and reader.readonly and reader.limit is None


def test_safe_url_hides_the_password():
    assert safe_url("postgresql+psycopg2://evo:secret@db.example/evo") == "postgresql+psycopg2://evo:***@db.example/evo"
    assert "secret" not in where("postgresql://evo:secret@db.example/evo")


# --- the values the loop reads of its storage are typed (issue #41 item 4) -------------------------------------------
def test_what_the_loop_reads_of_a_storage_has_a_type():
    """The trial ask() gives, the view of one step and the running trials are protocols (evo/core/protocols.py), not
    Any: mypy checks the loop's use of them (``Campaign.ledger`` is a Storage). The meta values and record()'s
    trial (each storage takes its own kind) stay Any."""
    from typing import Any, get_type_hints

    from evo.core.protocols import AskedTrial, StorageView

    returns = {n: get_type_hints(getattr(Storage, n))["return"] for n in ("ask", "view", "running")}
    assert returns["ask"] is AskedTrial and returns["view"] is StorageView
    assert Any not in returns.values() and "AskedTrial" in str(returns["running"])


def test_both_storages_give_what_the_protocols_name(tmp_path):
    for led in (open_ledger("memory:", "c", FAM.knobs), open_ledger(sqlite_url(tmp_path / "l.db"), "c", FAM.knobs)):
        trial = led.ask(fixed=FAM.baseline())
        assert isinstance(trial.number, int)
        view = led.view()
        assert [t.number for t in view.running] == [trial.number] == [t.number for t in led.running()]
        assert view.attempts == [] and view.champion() is None and FAM.baseline().key in view.seen
        assert led.elapsed_fn is None  # the loop sets it while it runs


def test_replay_on_a_storage_with_no_side_studies_is_one_line():
    """evo replay and selfcheck record beside the campaign (a side study of its database): a memory storage has
    none, and says so (an AttributeError before the loop held its storage as a Storage)."""
    from types import SimpleNamespace

    from evo.loop.errors import CampaignError
    from evo.loop.replay import recording_aside

    camp = SimpleNamespace(ledger=MemoryLedger())
    with pytest.raises(CampaignError, match="needs the campaign in a database"):
        with recording_aside(camp, "replay"):  # type: ignore[arg-type]
            pass
