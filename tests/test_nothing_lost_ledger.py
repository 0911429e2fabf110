"""Damaged, foreign and read-only ledgers, and one live evo run per campaign."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evo.cli import main
from evo.core.family import load_family
from evo.ledger.ledger import SESSION_ATTR, Ledger, SessionTaken

ROOT = Path(__file__).resolve().parent.parent
FAM = load_family("mhc_pre_big_fuse")
CAMPAIGN = "mhc_pre_big_fuse"


def _config(folder: Path, attempts: int = 6, campaign: str = CAMPAIGN) -> Path:
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    text = text.replace("campaign: mhc_pre_big_fuse", f"campaign: {campaign}")
    cfg = folder / f"{campaign}.yaml"
    cfg.write_text(text + f"\nstorage: sqlite:///{folder / 'camp' / 'ledger.db'}\n")
    return cfg


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    home = tmp_path_factory.mktemp("ledger-campaign")
    assert main(["run", str(_config(home)), "--plain"]) == 0
    return home / "camp" / "ledger.db"


@pytest.fixture
def home(recorded, tmp_path, monkeypatch):
    """tmp_path with a copy of the recorded 6-attempt ledger at camp/ledger.db, and the config; cwd."""
    (tmp_path / "camp").mkdir()
    shutil.copyfile(recorded, tmp_path / "camp" / "ledger.db")
    _config(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


def one_line(capsys, expect: str, rc: int, want: int = 2) -> str:
    out = capsys.readouterr()
    assert rc == want, (rc, out.err)
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evo: ") and expect in lines[0], out.err
    assert "Traceback" not in out.err + out.out
    return lines[0]


def _sql(db: Path, *statements: str) -> None:
    con = sqlite3.connect(db)
    try:
        for st in statements:
            con.execute(st)
        con.commit()
    finally:
        con.close()


# --- a storage that does not look like an evo campaign ---------------------------------------------------------------


def _zero(db: Path) -> None:
    db.write_bytes(b"")


def _unrelated(db: Path) -> None:
    db.unlink()
    _sql(db, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO photos VALUES (1, 'cat')")


def _missing_table(db: Path) -> None:
    _sql(db, "DROP TABLE trial_user_attributes")


def _wrong_schema(db: Path) -> None:
    _sql(db, "UPDATE alembic_version SET version_num = 'v9.9.9.a'", "UPDATE version_info SET library_version = '9.9.9'")


def _garbage(db: Path) -> None:
    db.write_bytes(os.urandom(8192))


def _truncated(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def _folder(db: Path) -> None:
    db.unlink()
    db.mkdir()


DAMAGE = [
    ("zero_length", _zero, "empty file"),
    ("unrelated_sqlite", _unrelated, "something else"),
    ("missing_table", _missing_table, "table trial_user_attributes is missing"),
    ("wrong_schema", _wrong_schema, "schema v9.9.9.a"),
    ("garbage", _garbage, "not a SQLite database"),
    ("truncated", _truncated, "damaged"),
    ("folder", _folder, "is a folder"),
]


@pytest.mark.parametrize("damage, expect", [d[1:] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
@pytest.mark.parametrize("cmd", ["run", "status", "log", "export"])
def test_a_storage_that_is_not_an_evo_campaign_is_refused_and_never_written(home, capsys, damage, expect, cmd):
    db = home / "camp" / "ledger.db"
    damage(db)
    before = md5(db) if db.is_file() else None
    files = sorted(p.relative_to(home) for p in home.rglob("*"))
    rc = main([cmd, str(home / f"{CAMPAIGN}.yaml"), *(["--plain"] if cmd == "run" else [])])
    one_line(capsys, expect, rc)
    assert (md5(db) if db.is_file() else None) == before
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == files  # not even a journal or a log


def test_a_new_ledger_appears_whole(tmp_path):
    db = tmp_path / "new" / "ledger.db"
    Ledger(f"sqlite:///{db}", "c", FAM.knobs)
    con = sqlite3.connect(db)
    tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert {"studies", "trials", "trial_user_attributes", "alembic_version", "version_info"} <= tables
    assert [p.name for p in db.parent.iterdir()] == ["ledger.db"]  # its temporary file is gone


def test_a_creation_clears_only_what_a_dead_creator_left(tmp_path):
    """Another worker's live creation (its temporary file and SQLite journal) survives; a killed one's goes.

    The journal's name ends in ``-journal``: reading the pid from its last parts took an all-digit random suffix
    for a dead pid and deleted a live writer's journal, which SQLite reports as "disk I/O error"."""
    db = tmp_path / "ledger.db"
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    live = [f".ledger.db.new-{os.getpid()}-12345678", f".ledger.db.new-{os.getpid()}-12345678-journal"]
    gone = [f".ledger.db.new-{dead}-abcdef01", f".ledger.db.new-{dead}-abcdef01-journal"]
    for name in live + gone:
        (tmp_path / name).write_bytes(b"x")
    Ledger(f"sqlite:///{db}", "c", FAM.knobs)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(live + ["ledger.db"])


def _kill_a_writer_mid_commit(db: Path) -> Path:
    """A writer killed inside a commit: its changed pages spilled into ``db``, the hot ``-journal`` left beside it."""
    writer = (
        "import os, signal, sqlite3\n"
        f"con = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "con.execute('PRAGMA cache_size = 1')\n"  # the changed pages spill into the file before the commit
        "con.execute('BEGIN')\n"
        'con.execute("UPDATE trial_user_attributes SET value_json = \'\\"gone\\"\'")\n'
        "con.execute('UPDATE trials SET state = 0')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    assert subprocess.run([sys.executable, "-c", writer]).returncode == -9
    journal = db.with_name(db.name + "-journal")
    assert journal.stat().st_size > 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # what the check used to call damaged
        sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("PRAGMA quick_check").fetchone()
    return journal


def _seen(led: Ledger) -> list[tuple]:
    return [(a.id, a.genome_key, a.verdict.kind) for a in led.attempts()]


def test_a_writer_killed_mid_commit_is_rolled_back_and_nothing_committed_is_lost(home, capsys):
    """``kill -9`` inside a write leaves a hot journal. Read-only commands read the last committed state from a
    rolled-back copy and write nothing; the next writer rolls the ledger back, keeping both files as they were.

    CI saw the check call such a ledger "damaged; restore it from a copy" after test_two_evo_run_processes_at_once
    killed its first evo run."""
    db = home / "camp" / "ledger.db"
    cfg = str(home / f"{CAMPAIGN}.yaml")
    before = _seen(Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs, readonly=True))
    assert len(before) == 6
    journal = _kill_a_writer_mid_commit(db)
    sums = {db.name: md5(db), journal.name: md5(journal)}
    assert main(["status", cfg]) == 0
    out = capsys.readouterr()
    assert "damaged" not in out.out + out.err and "6 recorded" in out.out, out.out + out.err
    assert "unfinished transaction" in out.err and "next evo run rolls it back" in out.err
    assert _seen(Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs, readonly=True)) == before
    assert {p.name: md5(p) for p in db.parent.iterdir()} == sums  # read only: the two files untouched
    capsys.readouterr()
    led = Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs)  # a writer (evo run, evo worker)
    assert _seen(led) == before and not journal.exists()
    (kept,) = [p for p in db.parent.iterdir() if p.name.startswith("ledger.db.before-rollback-")]
    assert {p.name: md5(p) for p in kept.iterdir()} == sums
    assert str(kept) in capsys.readouterr().err


def test_a_stale_journal_beside_a_restored_ledger_is_refused_and_nothing_is_written(home, capsys, tmp_path_factory):
    """SQLite cannot tell whose journal it finds: replayed onto a ledger restored from a copy after the writer died,
    it would corrupt it. It is replayed on a copy first; a result that reads damaged is refused, nothing written."""
    db = home / "camp" / "ledger.db"
    cfg = str(home / f"{CAMPAIGN}.yaml")
    other = tmp_path_factory.mktemp("bigger")
    assert main(["run", str(_config(other, attempts=12)), "--plain"]) == 0
    journal = _kill_a_writer_mid_commit(db)
    shutil.copyfile(other / "camp" / "ledger.db", db)  # the user restores a copy; the old journal stays
    sums = {p.name: md5(p) for p in db.parent.iterdir()}
    capsys.readouterr()
    line = one_line(capsys, "stale", main(["status", cfg]))
    assert journal.name in line and "nothing was written" in line
    with pytest.raises(Exception, match="stale"):
        Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs)
    assert {p.name: md5(p) for p in db.parent.iterdir()} == sums  # no rollback, no copy left beside it
    journal.unlink()  # what the message says to do
    assert len(Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs, readonly=True).attempts()) == 12


def test_a_damaged_ledger_with_a_hot_journal_is_refused_unwritten(home, capsys):
    db = home / "camp" / "ledger.db"
    journal = _kill_a_writer_mid_commit(db)
    with open(db, "r+b") as f:
        f.truncate(8192)
    sums = {p.name: md5(p) for p in db.parent.iterdir()}
    one_line(capsys, "damaged", main(["status", str(home / f"{CAMPAIGN}.yaml")]))
    with pytest.raises(Exception, match="damaged"):
        Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs)
    assert {p.name: md5(p) for p in db.parent.iterdir()} == sums and journal.exists()


def test_a_damaged_attempt_record_is_reported_and_skipped(home, capsys):
    """Ordinary records (#1, #3: turned down); a damaged baseline or champion is refused instead (issue 45,
    tests/test_nothing_lost_round2_ledger.py)."""
    db = home / "camp" / "ledger.db"
    cfg = str(home / f"{CAMPAIGN}.yaml")
    # one record cut short inside (still a JSON string), one not JSON at all (Optuna itself cannot parse it)
    _sql(
        db,
        'UPDATE trial_user_attributes SET value_json = \'"{\\"id\\": 1, \\"genome"\' WHERE key = \'attempt\' '
        "AND trial_id = (SELECT trial_id FROM trials WHERE number = 1)",
        "UPDATE trial_user_attributes SET value_json = '{not json' WHERE key = 'attempt' "
        "AND trial_id = (SELECT trial_id FROM trials WHERE number = 3)",
    )
    before = md5(db)
    assert main(["status", cfg]) == 0
    out = capsys.readouterr()
    assert "4 recorded" in out.out or "4 attempt" in out.out, out.out
    (warn,) = out.err.splitlines()
    assert "2 damaged attempt record(s) skipped (#1" in warn
    assert main(["log", cfg, "-o", str(home / "a.md")]) == 0
    assert "#4" in (home / "a.md").read_text()
    assert md5(db) == before
    led = Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs, readonly=True)
    assert [a.id for a in led.attempts()] == [0, 2, 4, 5] and set(led.damaged) == {1, 3}


def test_status_log_export_open_read_only_and_write_nothing(home, capsys, tmp_path_factory):
    db = home / "camp" / "ledger.db"
    cfg = str(home / f"{CAMPAIGN}.yaml")
    before = md5(db)
    os.chmod(db, 0o444)
    try:
        out = tmp_path_factory.mktemp("elsewhere")
        assert main(["status", cfg]) == 0
        assert main(["log", cfg, "-o", str(out / "a.md")]) == 0
        assert main(["export", cfg, "-o", str(out / "ex")]) == 0
    finally:
        os.chmod(db, 0o644)
    assert md5(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["ledger.db"]  # no journal, no log beside it
    led = Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs, readonly=True)
    with pytest.raises(Exception) as e:  # opened so that a write cannot happen (even for root)
        led.set_meta("x", 1)
    chain, err = [], e.value
    while err is not None:
        chain.append(str(err))
        err = err.__cause__ or err.__context__
    assert any("readonly" in c for c in chain), chain
    assert md5(db) == before


def test_a_mistyped_campaign_name_creates_no_study(home, capsys):
    db = home / "camp" / "ledger.db"
    before = md5(db)
    cfg = _config(home, campaign="mhc_pre_big_fuze")
    rc = main(["status", str(cfg)])
    one_line(capsys, "holds no campaign 'mhc_pre_big_fuze' (it holds: mhc_pre_big_fuse)", rc)
    for cmd in ("log", "export"):
        one_line(capsys, "holds no campaign", main([cmd, str(cfg)]))
    assert md5(db) == before


@pytest.mark.parametrize(
    "url, expect",
    [
        ("sqlite:////proc/evo/ledger.db", "/proc/evo"),
        ("sqlite:////dev/null/x/ledger.db", "/dev/null"),
        ("postgresql+psycopg2://u@127.0.0.1:1/db", "cannot open the storage"),
        ("mysql+nosuchdriver://u@127.0.0.1:1/db", "cannot open the storage"),
    ],
)
@pytest.mark.parametrize("cmd", ["run", "status"])
def test_storage_errors_are_one_line(home, capsys, url, expect, cmd):
    rc = main([cmd, str(home / f"{CAMPAIGN}.yaml"), "--storage", url, *(["--plain"] if cmd == "run" else [])])
    one_line(capsys, expect, rc)


def test_the_plain_postgresql_form_uses_the_installed_driver(monkeypatch):
    """`postgresql://user@host/db` (the form the README's hint shows) works with the pg extra: SQLAlchemy 2.1 reads
    it as psycopg 3, which the extra does not install; the error is then the server's, not "no database driver"."""
    import importlib.util

    from evo.ledger.ledger import LedgerError
    from evo.ledger.storage_url import with_installed_driver

    assert with_installed_driver("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert with_installed_driver("sqlite:///x.db") == "sqlite:///x.db"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a))
    if real("psycopg2") is None:
        pytest.skip("psycopg2 is not installed (the pg extra)")
    assert with_installed_driver("postgresql://u:pw@h:5/db") == "postgresql+psycopg2://u:pw@h:5/db"
    with pytest.raises(LedgerError) as e:
        Ledger("postgresql://u@127.0.0.1:1/db", CAMPAIGN, FAM.knobs)
    assert "no database driver" not in str(e.value) and "127.0.0.1" in str(e.value)


# --- one live evo run per campaign ------------------------------------------------------------------------------------


def _sessions(db: Path) -> list[dict]:
    con = sqlite3.connect(db)
    try:
        return [
            json.loads(v)
            for (v,) in con.execute(
                "SELECT value_json FROM study_system_attributes WHERE key LIKE ?", (SESSION_ATTR + "%",)
            )
        ]
    finally:
        con.close()


def test_a_second_run_is_refused_naming_the_first(home, capsys):
    db = home / "camp" / "ledger.db"
    cfg = str(home / f"{CAMPAIGN}.yaml")
    first = Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs)
    first.claim("run")  # a live evo run (this process)
    before = md5(db)
    rc = main(["run", cfg, "--attempts", "8", "--plain"])
    line = one_line(capsys, f"is being run by evo run on {socket.gethostname()} pid {os.getpid()}", rc)
    assert "evo worker" in line
    one_line(capsys, "is being run by evo run", main(["worker", cfg, "--attempts", "8"]))
    assert md5(db) == before
    first.release()
    assert _sessions(db) == []
    assert main(["run", cfg, "--attempts", "8", "--plain"]) == 0
    assert "8 recorded" in capsys.readouterr().out
    assert _sessions(db) == []  # released at the end


def test_workers_share_and_a_run_waits_for_them(home):
    db = f"sqlite:///{home / 'camp' / 'ledger.db'}"
    a, b = Ledger(db, CAMPAIGN, FAM.knobs), Ledger(db, CAMPAIGN, FAM.knobs)
    a.claim("worker")
    b.claim("worker")
    with pytest.raises(SessionTaken, match="evo worker on"):
        Ledger(db, CAMPAIGN, FAM.knobs).claim("run")
    a.release()
    b.release()
    Ledger(db, CAMPAIGN, FAM.knobs).claim("run")  # (a Ledger gone: its session counts as ended)


def _fake_session(db: Path, **owner) -> None:
    rec = {
        "host": "elsewhere",
        "pid": 4242,
        "start": "1",
        "boot": "other-boot",
        "pidns": "pid:[1]",
        "ledger": "tok",
        "mode": "run",
        "beat": time.time(),
        "since": "then",
        **owner,
    }
    con = sqlite3.connect(db)
    try:
        (sid,) = con.execute("SELECT study_id FROM studies").fetchone()
        con.execute(
            "INSERT INTO study_system_attributes (study_id, key, value_json) VALUES (?, ?, ?)",
            (sid, SESSION_ATTR + rec["ledger"], json.dumps(rec)),
        )
        con.commit()
    finally:
        con.close()


def test_a_killed_run_does_not_block_the_next(home):
    db = home / "camp" / "ledger.db"
    url = f"sqlite:///{db}"
    # another host, heartbeat fresh: it may be running
    _fake_session(db, ledger="fresh")
    with pytest.raises(SessionTaken, match="evo run on elsewhere pid 4242"):
        Ledger(url, CAMPAIGN, FAM.knobs).claim("run")
    _sql(db, f"DELETE FROM study_system_attributes WHERE key = '{SESSION_ATTR}fresh'")
    # another host, no heartbeat for longer than the grace period: stale
    _fake_session(db, ledger="stale", beat=time.time() - 3600)
    # this host, its process gone (kill -9): at once
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    from evo.core.liveness import identity

    me = identity()
    _fake_session(
        db, ledger="dead", host=me["host"], pid=int(dead.stdout), start="1", boot=me["boot"], pidns=me["pidns"]
    )
    led = Ledger(url, CAMPAIGN, FAM.knobs)
    led.claim("run")
    assert [s["ledger"] for s in _sessions(db)] == [led._token]


def test_two_evo_run_processes_at_once(home):
    """The real thing: a second `evo run` process while the first runs."""
    cfg = home / f"{CAMPAIGN}.yaml"
    db = home / "camp" / "ledger.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen(
        [sys.executable, "-m", "evo", "run", str(cfg), "--attempts", "100000", "--minutes", "30", "--plain"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().startswith("evo: campaign"), first.stderr.read() if first.poll() else ""
        second = subprocess.run(
            [sys.executable, "-m", "evo", "run", str(cfg), "--plain"],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2, second.stderr
        assert second.stderr.splitlines() == [second.stderr.strip()]
        from tests.test_nothing_lost_round3 import _tree  # (the campaign runs in evo run's watched child)

        assert any(f"pid {p}" in second.stderr for p in _tree(first.pid)) and "evo run on" in second.stderr
    finally:
        first.kill()
        first.wait()
    led = Ledger(f"sqlite:///{db}", CAMPAIGN, FAM.knobs)
    keys = [a.genome_key for a in led.attempts() if a.verdict.kind != "interrupted"]
    assert len(keys) == len(set(keys))  # nothing measured twice
    led.claim("run")  # the killed one does not block the next
