"""Issue 45 ("Nothing lost, round two"), the ledger's part: damaged key records refused, damaged rows skipped,
locked / foreign / WAL told apart, and storage paths with URL characters.

Each ledger is damaged with sqlite3 directly, as a hostile user (or a failing disk) would, then `evo` is run on it."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from evo.cli import main
from evo.core.family import load_family
from evo.ledger.ledger import Ledger, LedgerError
from evo.ledger.storage_url import engine_url, sqlite_path, sqlite_url

ROOT = Path(__file__).resolve().parent.parent
FAM = load_family("mhc_pre_big_fuse")
CAMPAIGN = "mhc_pre_big_fuse"
CHAMPION = 4  # the recorded 6-attempt campaign's champion (#2 accepted before it, #0 the baseline)


def _config(folder: Path, attempts: int = 6, storage: bool = True) -> Path:
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    cfg = folder / f"{CAMPAIGN}.yaml"
    if storage:
        text += f"\nstorage: {sqlite_url(folder / 'camp' / 'ledger.db')}\n"
    cfg.write_text(text)
    return cfg


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    home = tmp_path_factory.mktemp("round2-campaign")
    assert main(["run", str(_config(home)), "--plain"]) == 0
    return home / "camp" / "ledger.db"


@pytest.fixture
def home(recorded, tmp_path, monkeypatch):
    (tmp_path / "camp").mkdir()
    shutil.copyfile(recorded, tmp_path / "camp" / "ledger.db")
    _config(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


def _sql(db: Path, *statements: str) -> None:
    con = sqlite3.connect(db)
    try:
        for st in statements:
            con.execute(st)
        con.commit()
    finally:
        con.close()


def _evo(home: Path, cmd: str, *extra: str) -> list[str]:
    args = [cmd, str(home / f"{CAMPAIGN}.yaml"), *extra]
    if cmd == "run":
        args += ["--plain", "--attempts", "8"]
    if cmd == "export":
        args += ["-o", str(home / "ex")]
    return args


def one_line(capsys, rc: int, *expect: str) -> str:
    out = capsys.readouterr()
    assert rc == 2, (rc, out.out, out.err)
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evo: "), out.err
    assert "Traceback" not in out.err + out.out
    for e in expect:
        assert e in lines[0], lines[0]
    return lines[0]


def _attempt_of(number: int) -> str:
    return f"trial_id = (SELECT trial_id FROM trials WHERE number = {number})"


def _damage_attempt(db: Path, number: int, verdict_too: bool = False) -> None:
    keys = "('attempt', 'verdict')" if verdict_too else "('attempt')"
    _sql(
        db, f"UPDATE trial_user_attributes SET value_json = '{{not json' WHERE key IN {keys} AND {_attempt_of(number)}"
    )


def _trial_count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT count(*) FROM trials").fetchone()[0])
    finally:
        con.close()


# --- item 2: the key records ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["run", "status", "export", "log"])
def test_a_damaged_baseline_record_is_refused_never_measured_again(home, capsys, cmd):
    """Today: `run` measured a second baseline (#6), moved baseline_id and kept the champion accepted against #0."""
    db = home / "camp" / "ledger.db"
    _damage_attempt(db, 0)
    before = md5(db)
    line = one_line(capsys, main(_evo(home, cmd)), "baseline", "#0", "damaged", "restore")
    assert "nothing was written" in line
    assert md5(db) == before and _trial_count(db) == 6


@pytest.mark.parametrize("verdict_too", [False, True], ids=["attempt", "attempt-and-verdict"])
@pytest.mark.parametrize("cmd", ["run", "status", "export"])
def test_a_damaged_champion_record_is_refused_never_an_older_step(home, capsys, cmd, verdict_too):
    """Today: status and export (exit 0) presented #2 as champion, and run accepted #4's genome again."""
    db = home / "camp" / "ledger.db"
    _damage_attempt(db, CHAMPION, verdict_too)
    before = md5(db)
    one_line(capsys, main(_evo(home, cmd)), "champion", f"#{CHAMPION}", "damaged", "restore")
    assert md5(db) == before and _trial_count(db) == 6


@pytest.mark.parametrize("cmd", ["run", "status"])
def test_a_ledger_whose_every_record_is_damaged_is_refused_not_restarted(home, capsys, cmd):
    """Today: status said "0 recorded" and run started a new campaign inside the ledger."""
    db = home / "camp" / "ledger.db"
    _sql(db, "UPDATE trial_user_attributes SET value_json = '{not json' WHERE key = 'attempt'")
    before = md5(db)
    one_line(capsys, main(_evo(home, cmd)), "damaged", "restore")
    assert md5(db) == before and _trial_count(db) == 6


def test_a_damaged_ordinary_record_is_skipped_and_its_genome_not_measured_again(home, capsys):
    db = home / "camp" / "ledger.db"
    con = sqlite3.connect(db)
    (key,) = con.execute(
        f"SELECT value_json FROM trial_user_attributes WHERE key = 'genome_key' AND {_attempt_of(3)}"
    ).fetchone()
    con.close()
    _damage_attempt(db, 3)
    assert main(_evo(home, "run")) == 0
    out = capsys.readouterr()
    assert "1 damaged attempt record(s) skipped (#3" in out.err and "Traceback" not in out.err
    led = Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs, readonly=True)
    assert [a.genome_key for a in led.attempts()].count(key.strip('"').replace('\\"', '"')) == 0


@pytest.mark.parametrize("cmd", ["run", "status"])
def test_a_duplicated_trial_number_is_detected(home, capsys, cmd):
    """Today: #5 renumbered #3 hid both, and run measured one of their genomes a second time, with no warning."""
    db = home / "camp" / "ledger.db"
    _sql(db, "UPDATE trials SET number = 3 WHERE number = 5")
    before = md5(db)
    rc = main(_evo(home, cmd))
    if cmd == "run":
        one_line(capsys, rc, "#3", "twice", "restore")
        assert md5(db) == before
    else:
        out = capsys.readouterr()
        assert rc == 0 and "Traceback" not in out.err
        assert "attempt number #3 is held by 2 trials" in out.err, out.err


# --- item 5: damaged rows that made tracebacks ------------------------------------------------------------------------

ROWS = [
    (
        "param_index_out_of_range",
        f"UPDATE trial_params SET param_value = 99 WHERE {_attempt_of(3)} AND param_name = 'block'",
    ),
    ("state_outside_the_enum", "UPDATE trials SET state = 'BOGUS' WHERE number = 3"),
    ("param_distribution_not_json", f"UPDATE trial_params SET distribution_json = '{{x' WHERE {_attempt_of(3)}"),
]


@pytest.mark.parametrize("sql", [r[1] for r in ROWS], ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("cmd", ["status", "log", "run"])
def test_a_damaged_row_is_skipped_with_a_count_not_a_traceback(home, capsys, sql, cmd):
    db = home / "camp" / "ledger.db"
    _sql(db, sql)
    rc = main(_evo(home, cmd))
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "Traceback" not in out.err + out.out
    assert "1 damaged attempt record(s) skipped (#3" in out.err, out.err


META = [
    ("config_not_json", "config", "'{not json'"),
    ("config_a_list", "config", "'[1, 2]'"),
    ("baseline_hashes_a_list", "baseline_hashes", "'[1, 2]'"),
    ("baseline_hashes_a_string", "baseline_hashes", "'\"x\"'"),
    ("baseline_id_a_string", "baseline_id", "'\"zero\"'"),
    ("backend_not_json", "backend", "'{'"),
]


@pytest.mark.parametrize("key, value", [m[1:] for m in META], ids=[m[0] for m in META])
@pytest.mark.parametrize("cmd", ["run", "status"])
def test_a_damaged_campaign_meta_record_is_refused_in_one_line(home, capsys, key, value, cmd):
    db = home / "camp" / "ledger.db"
    _sql(db, f"UPDATE study_user_attributes SET value_json = {value} WHERE key = '{key}'")
    before = md5(db)
    one_line(capsys, main(_evo(home, cmd)), f"meta {key!r}", "damaged", "restore")
    assert md5(db) == before


def test_a_damaged_ordinary_meta_record_is_skipped_with_a_count(home, capsys):
    db = home / "camp" / "ledger.db"
    _sql(db, "UPDATE study_user_attributes SET value_json = '{not json' WHERE key = 'peer_torch_compile'")
    assert main(_evo(home, "status")) == 0
    out = capsys.readouterr()
    assert "1 damaged campaign meta record(s) skipped (peer_torch_compile" in out.err, out.err
    assert "6 recorded" in out.out


# --- item 4: locked, foreign, WAL -------------------------------------------------------------------------------------


def _short_lock_wait(monkeypatch, seconds: float) -> None:
    try:
        from evo.ledger import sqlite_file
    except ImportError:  # before issue 45: a fixed 30 s
        return
    monkeypatch.setattr(sqlite_file, "LOCK_WAIT_S", seconds)


@pytest.mark.parametrize("cmd", ["status", "run"])
def test_a_ledger_locked_by_another_program_is_said_locked_never_damaged(home, capsys, monkeypatch, cmd):
    """Today, after 30 s: "damaged (SQLite: database is locked); restore it from a copy"."""
    _short_lock_wait(monkeypatch, 0.5)
    db = home / "camp" / "ledger.db"
    before = md5(db)
    con = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    try:
        line = one_line(capsys, main(_evo(home, cmd)), "locked by another process")
    finally:
        con.execute("ROLLBACK")
        con.close()
    assert "damaged" not in line and "restore" not in line and "copy" not in line
    assert md5(db) == before
    assert main(_evo(home, "status")) == 0  # released: read as ever


def _foreign_wal(where: Path) -> Path:
    """Another program's database in WAL mode with committed frames still in its -wal (its writer is alive)."""
    other = where / "other.db"
    con = sqlite3.connect(other, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO photos VALUES (1, 'cat')")
    wal = Path(f"{other}-wal")
    assert wal.stat().st_size > 0
    kept = where / "stray-wal"
    shutil.copyfile(wal, kept)
    con.close()
    return kept


@pytest.mark.parametrize("cmd", ["status", "run"])
def test_a_stray_wal_of_another_database_is_never_applied(home, capsys, tmp_path_factory, cmd):
    """Today: the healthy ledger read as "a SQLite database of something else (tables: photos)", and a read-write
    open would have applied the other database's pages to it."""
    db = home / "camp" / "ledger.db"
    stray = _foreign_wal(tmp_path_factory.mktemp("other"))
    wal = Path(f"{db}-wal")
    shutil.copyfile(stray, wal)
    rc = main(_evo(home, cmd))
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "something else" not in out.err and "Traceback" not in out.err
    assert "-wal" in out.err  # said, with where it is kept
    if cmd == "run":
        assert not wal.exists()
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        con.close()
        assert "photos" not in tables and "trials" in tables
        (kept,) = [p for p in db.parent.rglob("*") if p.is_file() and p.name.startswith("ledger.db-wal")]
        assert md5(kept) == md5(stray)  # moved aside, kept as it was
        assert "8 recorded" in out.out
    else:
        assert md5(wal) == md5(stray)  # a read-only command moves nothing
        assert "6 recorded" in out.out


def _journal_mode(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return str(con.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        con.close()


def test_a_ledger_switched_to_wal_is_set_back_and_new_attempts_are_in_the_file(home, capsys, tmp_path_factory):
    """Today: after `evo run` the ledger stayed in WAL mode, new attempts only in ledger.db-wal while another program
    held it open, and a copy of ledger.db alone (what users copy) missed them."""
    db = home / "camp" / "ledger.db"
    assert _journal_mode(db) == "delete"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.close()
    assert _journal_mode(db) == "wal"
    assert main(_evo(home, "run")) == 0
    capsys.readouterr()
    assert _journal_mode(db) == "delete" and not Path(f"{db}-wal").exists()
    copy = tmp_path_factory.mktemp("copy") / "ledger.db"
    shutil.copyfile(db, copy)
    assert len(Ledger(sqlite_url(copy), CAMPAIGN, FAM.knobs, readonly=True).attempts()) == 8


def test_a_wal_ledger_held_open_by_another_program_is_refused_for_writing(home, capsys):
    db = home / "camp" / "ledger.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("SELECT count(*) FROM trials").fetchone()  # held open, a reader
    try:
        line = one_line(capsys, main(_evo(home, "run")), "WAL", "another")
        assert "damaged" not in line and "restore" not in line
    finally:
        con.close()


# --- item 6: storage paths with URL characters ------------------------------------------------------------------------

NAMES = ["a?b", "c#d", "e%f", "g h", "i%20j", "ü€", "{SCHEMA_VERSION}"]


@pytest.mark.parametrize("name", NAMES)
def test_the_storage_url_helper_round_trips_every_path(tmp_path, name):
    path = tmp_path / name / "ledger.db"
    url = sqlite_url(path)
    assert sqlite_path(url) == path
    from sqlalchemy.engine import make_url

    assert make_url(url).database == str(path)  # what Optuna / SQLAlchemy read it as
    path.parent.mkdir()
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.close()
    from sqlalchemy import create_engine, text

    for ro in (False, True):
        eng = create_engine(engine_url(path, readonly=ro))
        with eng.connect() as c:
            assert c.execute(text("SELECT name FROM sqlite_master")).scalar() == "t"
        eng.dispose()
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([name, "ledger.db"])  # no stray file


def test_a_campaign_in_a_folder_with_url_characters_runs_and_reads(tmp_path, monkeypatch, capsys):
    """Today: `?` made a stray file and warnings, `#` a campaign that status/export could not read, `%20` failed."""
    where = tmp_path / "w?x#y%z a%20b ü"
    where.mkdir()
    monkeypatch.chdir(where)
    cfg = _config(where, attempts=3, storage=False)  # the default storage: logs/<campaign>/ledger.db here
    assert main(["run", str(cfg), "--plain"]) == 0
    assert main(["status", str(cfg)]) == 0
    out = capsys.readouterr()
    assert "3 recorded" in out.out and "Traceback" not in out.err and "arning" not in out.err, out.err
    assert main(["export", str(cfg), "-o", str(where / "ex")]) == 0
    db = where / "logs" / CAMPAIGN / "ledger.db"
    assert len(Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs, readonly=True).attempts()) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [where.name]  # nothing written beside it
    assert sorted(p.name for p in db.parent.iterdir() if p.name.startswith("ledger")) == ["ledger.db"]


def test_a_user_typed_percent_escape_names_one_file_everywhere(tmp_path, monkeypatch, capsys):
    """`%20` in a typed URL is a space, as SQLAlchemy (and so Optuna) reads it: evo's own checks, its log folder and
    the database all name the same file (today: evo checked `a%20b/`, Optuna opened `a b/`, and it failed)."""
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path, attempts=2, storage=False)
    url = f"sqlite:///{tmp_path}/a%20b/ledger.db"
    assert main(["run", str(cfg), "--plain", "--storage", url]) == 0
    assert main(["status", str(cfg), "--storage", url]) == 0
    out = capsys.readouterr()
    assert "2 recorded" in out.out and "Traceback" not in out.err, out.err
    assert (tmp_path / "a b" / "ledger.db").is_file() and (tmp_path / "a b" / "attempts.md").is_file()
    assert not (tmp_path / "a%20b").exists()


def test_a_user_typed_sqlite_url_with_a_raw_question_mark_is_refused_in_one_line(home, capsys):
    rc = main(["status", str(home / f"{CAMPAIGN}.yaml"), "--storage", f"sqlite:///{home}/a?b/ledger.db"])
    one_line(capsys, rc, "%3F")


def test_a_damaged_key_record_refuses_the_ledger_api_too(home):
    db = home / "camp" / "ledger.db"
    _damage_attempt(db, 0)
    with pytest.raises(LedgerError, match="baseline"):
        Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs)


def test_a_lock_wait_is_bounded_and_said(home, monkeypatch):
    """The read-only check waits LOCK_WAIT_S for another program's write lock, then says it is locked."""
    _short_lock_wait(monkeypatch, 0.3)
    db = home / "camp" / "ledger.db"
    con = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LedgerError, match="locked by another process"):
            Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs, readonly=True)
    finally:
        con.execute("ROLLBACK")
        con.close()


# --- item 10: workers ---------------------------------------------------------------------------------------------


def test_a_worker_with_another_budget_is_refused_before_it_says_it_joins(home, capsys):
    """Today: a refused worker printed "joins campaign" first, and workers given --attempts 150 and 155 each ran to
    its own budget, the campaign ending at the largest."""
    db = home / "camp" / "ledger.db"
    first = Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs, shared=True)
    first.limit = 7
    first.claim("worker")  # a live worker (this process) with --attempts 7
    try:
        before = md5(db)
        rc = main(["worker", str(home / f"{CAMPAIGN}.yaml"), "--attempts", "9"])
        out = capsys.readouterr()
        assert "joins" not in out.out, out.out
        line = out.err.strip()
        assert rc == 2 and len(out.err.splitlines()) == 1, out.err
        assert "--attempts 7" in line and "--attempts 9" in line and "same --attempts" in line
        assert md5(db) == before
        b = Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs, shared=True)
        b.limit = 7
        b.claim("worker")  # the same budget: shares
        b.release()
    finally:
        first.release()


def test_a_worker_refused_by_a_running_evo_run_never_says_it_joins(home, capsys):
    db = home / "camp" / "ledger.db"
    run = Ledger(sqlite_url(db), CAMPAIGN, FAM.knobs)
    run.claim("run")
    try:
        rc = main(["worker", str(home / f"{CAMPAIGN}.yaml"), "--attempts", "8"])
        out = capsys.readouterr()
        assert rc == 2 and "joins" not in out.out and "is being run by evo run" in out.err, out.out + out.err
    finally:
        run.release()
