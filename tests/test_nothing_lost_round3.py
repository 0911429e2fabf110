"""Issue 45 ("Nothing lost, round two"), the items the first round left: the campaign's own ideas writer never goes
through a symlink, a foreign ``-wal`` beside a WAL-mode ledger, a lock wait under a stop request, the family's other
hooks isolated in `evo run`, and no message naming a temporary file that is gone.

Each test reproduces its case on the code before the fix."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from evo.cli import main
from evo.loop.campaign_ideas import write_ideas
from evo.search.ideas import Idea, make_patch
from tests.test_nothing_lost_round2 import _shipped_family_with, _wait_or_fail, one_line
from tests.test_nothing_lost_round2 import evo as evo_cmd
from tests.test_nothing_lost_round2_ledger import (
    _evo,
    _foreign_wal,
    _journal_mode,
    home,  # noqa: F401 - a fixture
    md5,
    recorded,  # noqa: F401 - a fixture
)

ROOT = Path(__file__).resolve().parent.parent


def _idea(slug: str) -> Idea:
    src = "__global__ void k() {}\n"
    return Idea(slug=slug, title="t", rationale="r", patch=make_patch(src, "#pragma unroll\n" + src))


def _writer(log_dir: Path) -> tuple[SimpleNamespace, list[str]]:
    out: list[str] = []
    return SimpleNamespace(log_dir=log_dir, out=out.append), out


def test_the_campaigns_ideas_writer_never_writes_through_a_symlink_or_over_a_users_file(tmp_path):
    """Before: ``(log/ideas/<slug>.patch).write_text`` followed a symlink there (the user's file it points at was
    overwritten) and replaced a file the user had put there."""
    ideas = tmp_path / "log" / "ideas"
    ideas.mkdir(parents=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's\n")
    (ideas / "linked.patch").symlink_to(precious)
    (ideas / "mine.patch").write_text("my draft\n")
    camp, out = _writer(tmp_path / "log")
    write_ideas(camp.log_dir, [_idea("linked"), _idea("mine"), _idea("fresh")], camp.out)
    assert precious.read_text() == "the user's\n" and (ideas / "linked.patch").is_symlink()
    assert (ideas / "mine.patch").read_text() == "my draft\n"
    assert "+#pragma unroll" in (ideas / "fresh.patch").read_text()
    warned = [line for line in out if line.startswith("warning: could not write idea")]
    assert len(warned) == 2 and "symlink" in warned[0] and "not written by evo" in warned[1], out
    # What evo wrote there itself it writes again (a resumed campaign's proposer answers the same slug).
    write_ideas(camp.log_dir, [_idea("fresh")], camp.out)
    assert len(out) == 2


# --- a foreign -wal beside a ledger in WAL mode ---------------------------------------------------------------------


def _wal_mode_with_a_foreign_wal(folder: Path, tmp_path_factory) -> tuple[Path, Path, Path]:
    """The ledger switched to WAL mode by another program (checkpointed, closed) and another database's -wal put
    beside it: SQLite takes any -wal beside a WAL-mode database as its own and applies its frames."""
    db = folder / "camp" / "ledger.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.close()
    assert _journal_mode(db) == "wal" and not Path(f"{db}-wal").exists()
    stray = _foreign_wal(tmp_path_factory.mktemp("other"))
    wal = Path(f"{db}-wal")
    shutil.copyfile(stray, wal)
    return db, wal, stray


@pytest.mark.parametrize("cmd", ["status", "run"])
def test_a_foreign_wal_beside_a_wal_mode_ledger_is_never_applied(home, capsys, tmp_path_factory, cmd):  # noqa: F811
    """Before: the ledger was read with the other database's pages ("a SQLite database of something else (tables:
    photos)", advising another storage) and a writer would have applied them to ledger.db."""
    db, wal, stray = _wal_mode_with_a_foreign_wal(home, tmp_path_factory)
    before = md5(db)
    rc = main(_evo(home, cmd))
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "something else" not in out.err and "Traceback" not in out.err
    assert "-wal" in out.err and "not the ledger's" in out.err
    if cmd == "run":
        assert not wal.exists() and _journal_mode(db) == "delete"
        (kept,) = [p for p in db.parent.rglob("*") if p.is_file() and p.name.startswith("ledger.db-wal")]
        assert md5(kept) == md5(stray)  # moved aside, kept as it was
        assert "8 recorded" in out.out
    else:
        assert md5(wal) == md5(stray) and md5(db) == before  # a read-only command moves and writes nothing
        assert "6 recorded" in out.out


def test_the_ledgers_own_wal_is_kept_and_applied(home, capsys, tmp_path_factory):  # noqa: F811
    """The other side: committed frames another program left in the ledger's own -wal (its writer killed) are the
    ledger's: applied (checkpointed into ledger.db by the writer), never moved aside."""
    db = home / "camp" / "ledger.db"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("UPDATE studies SET study_name = study_name")
    saved = tmp_path_factory.mktemp("walcopy")
    for f in (db, Path(f"{db}-wal")):
        shutil.copyfile(f, saved / f.name)  # as a killed writer leaves them
    con.close()
    for f in saved.iterdir():
        shutil.copyfile(f, db.parent / f.name)
    assert Path(f"{db}-wal").stat().st_size > 0
    assert main(_evo(home, "status")) == 0
    out = capsys.readouterr()
    assert "not the ledger's" not in out.err and "6 recorded" in out.out
    gc.collect()  # (status ran in this process: its pooled connection closes with its engine, as at a process's end)
    assert main(_evo(home, "run")) == 0
    out = capsys.readouterr()
    assert "not the ledger's" not in out.err and "8 recorded" in out.out
    assert not [p for p in db.parent.iterdir() if ".stray-wal-" in p.name]
    assert _journal_mode(db) == "delete" and not Path(f"{db}-wal").exists()


# --- a lock wait under a stop request -------------------------------------------------------------------------------


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (`evo run` runs its campaign in a watched child: evo/run_child.py)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
    return out


def _opened(pid: int, db: Path) -> bool:
    with contextlib.suppress(OSError):
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(db) for fd in os.listdir(f"/proc/{pid}/fd"))
    return False


def _holding(pid: int, db: Path, timeout: float = 90) -> None:
    """Waits until process ``pid`` (or its child) has ``db`` open (then it is in SQLite's wait for the lock held
    here)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(_opened(p, db) for p in _tree(pid)):
            return
        time.sleep(0.1)
    pytest.fail(f"the process never opened {db}")


@pytest.mark.parametrize("cmd", ["status", "run"])
def test_a_wait_for_another_programs_lock_honours_the_first_stop(home, cmd):  # noqa: F811
    """Before: SQLite's busy wait (30 s, in C) held the stop request until it ran out."""
    db = (home / "camp" / "ledger.db").resolve()
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evo", *_evo(home, cmd)],
            cwd=home,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _holding(proc.pid, db)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        rc = _wait_or_fail(proc, 10)
        out, err = proc.communicate()
    finally:
        con.execute("ROLLBACK")
        con.close()
    assert rc == 128 + signal.SIGTERM, (rc, out, err)
    assert "Traceback" not in out + err and "stopped by SIGTERM" in err, (out, err)
    assert "damaged" not in err


# --- the family's other hooks in `evo run` ---------------------------------------------------------------------------

_NOT_AT_BASELINE = (
    "_l = MhcPreBigFuse.launch\ndef _x(self, g, geo):\n    if g != self.baseline(): {}\n    return _l(self, g, geo)\n"
    "MhcPreBigFuse.launch = _x"
)


@pytest.mark.parametrize(
    "code, expect",
    [
        ("import os\n" + _NOT_AT_BASELINE.format("os._exit(0)"), "launch() called os._exit(0)"),
        ("import sys\n" + _NOT_AT_BASELINE.format("sys.exit(3)"), "launch() called sys.exit(3)"),
    ],
    ids=["os_exit_in_launch", "sys_exit_in_launch"],
)
def test_evo_run_names_a_launch_that_ends_the_process(tmp_path, code, expect):
    """Before: `evo run` exited 0 (os._exit) or 3 (sys.exit) after the baseline, with no word: a false pass in CI."""
    r = evo_cmd("run", str(_shipped_family_with(tmp_path, code)), "--plain", cwd=tmp_path)
    line = one_line(r, expect, rc=2)
    assert "family mhc_pre_big_fuse" in line


def test_evo_run_of_a_launch_that_loops_honours_the_first_stop(tmp_path):
    """Before: the stop request was only recorded while the family's launch() looped; a second signal was needed."""
    marker = tmp_path / "looping"
    spin = f"def _spin():\n    open({str(marker)!r}, 'w').close()\n    while True:\n        pass\n"
    cfg = _shipped_family_with(tmp_path, spin + _NOT_AT_BASELINE.format("_spin()"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "evo", "run", str(cfg), "--plain"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    end = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    rc = _wait_or_fail(proc, 10)
    out, err = proc.communicate()
    assert rc == 128 + signal.SIGTERM, (rc, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err and "stopped by SIGTERM" in out + err, (out[-2000:], err[-2000:])
    r = evo_cmd("status", str(cfg), cwd=tmp_path)  # what was recorded reads as ever
    assert r.returncode == 0 and "recorded" in r.stdout, r.stdout + r.stderr
