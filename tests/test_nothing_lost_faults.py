"""Faults under a command: a full disk (fault-injected writes), a reader that leaves (`evo status | head`)."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy.exc
import yaml

from evo.cli import main
from evo.core.family import load_family
from evo.ledger.ledger import Ledger

ROOT = Path(__file__).resolve().parent.parent
FAM = load_family("mhc_pre_big_fuse")
BASE = yaml.safe_load((ROOT / "configs/mhc_pre_big_fuse.yaml").read_text())
BASE.update(backend="recorded", budget={"attempts": 10})


def _cfg(t: Path) -> Path:
    p = t / "c.yaml"
    p.write_text(yaml.safe_dump({**BASE, "storage": f"sqlite:///{t / 'camp' / 'ledger.db'}"}, sort_keys=False))
    return p


def _full(*_a, **_k):
    raise sqlalchemy.exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full"))


def _one_line(capsys, rc: int, expect: str) -> None:
    out = capsys.readouterr()
    assert rc == 2, (rc, out.err)
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evo: ") and expect in lines[0], out.err
    assert "Traceback" not in out.err + out.out


def _check(db: Path, budget: int | None = None) -> None:
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    led = Ledger(f"sqlite:///{db}", "mhc_pre_big_fuse", FAM.knobs, readonly=True)
    done = [a for a in led.attempts() if a.verdict.kind != "interrupted"]
    keys = [a.genome_key for a in done]
    assert len(keys) == len(set(keys))
    if budget is not None:
        assert len(done) == budget


def test_disk_full_in_the_ledger_mid_run(tmp_path, monkeypatch, capsys):
    cfg = _cfg(tmp_path)
    monkeypatch.chdir(tmp_path)
    real = Ledger._commit
    calls = []

    def commit(self, *a, **k):  # the disk fills up after a few attempts
        calls.append(1)
        if len(calls) > 5:
            _full()
        return real(self, *a, **k)

    monkeypatch.setattr(Ledger, "_commit", commit)
    _one_line(capsys, main(["run", str(cfg), "--plain"]), "database or disk is full")
    monkeypatch.setattr(Ledger, "_commit", real)
    db = tmp_path / "camp" / "ledger.db"
    assert not list(tmp_path.rglob("*.tmp"))
    _check(db)
    assert main(["run", str(cfg), "--plain"]) == 0  # room again: resumed, nothing lost or measured twice
    _check(db, budget=10)


def test_disk_full_writing_the_attempt_log(tmp_path, monkeypatch, capsys):
    cfg = _cfg(tmp_path)
    monkeypatch.chdir(tmp_path)
    real = Path.write_text

    def write_text(self, *a, **k):
        if self.name.endswith(".md.tmp"):
            real(self, "half a lo", encoding="utf-8")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    _one_line(capsys, main(["run", str(cfg), "--plain"]), "No space left on device")
    _one_line(capsys, main(["log", str(cfg)]), "No space left on device")
    monkeypatch.setattr(Path, "write_text", real)
    assert not list(tmp_path.rglob("*.tmp"))  # no half-written temporary file beside the log
    _check(tmp_path / "camp" / "ledger.db", budget=10)


def test_disk_full_during_export_then_force_recovers(tmp_path, monkeypatch, capsys):
    cfg = _cfg(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(cfg), "--plain"]) == 0
    capsys.readouterr()
    real = os.fsync
    n = []

    def fsync(fd):  # the disk fills while the second exported file is flushed: its part file stays, half written
        n.append(1)
        if len(n) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    _one_line(capsys, main(["export", str(cfg), "-o", "ex"]), "No space left on device")
    monkeypatch.setattr(os, "fsync", real)
    # what it left is its own: --force replaces it (the partial file included)
    assert main(["export", str(cfg), "-o", "ex", "--force"]) == 0
    assert main(["export", str(cfg), "-o", "ex2"]) == 0
    assert {p.name: p.read_bytes() for p in (tmp_path / "ex").iterdir()} == {
        p.name: p.read_bytes() for p in (tmp_path / "ex2").iterdir()
    }


def test_status_into_a_closed_pipe_is_quiet(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(cfg), "--plain", "--attempts", "3"]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    read, write = os.pipe()
    os.close(read)  # `| head` that has already left
    try:
        p = subprocess.run(
            [sys.executable, "-m", "evo", "status", str(cfg)],
            cwd=tmp_path,
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert p.returncode == 1 and p.stderr == "", p.stderr


@pytest.mark.parametrize("cmd", ["status", "log", "export"])
def test_a_ledger_replaced_by_a_folder_is_one_line(tmp_path, monkeypatch, capsys, cmd):
    cfg = _cfg(tmp_path)
    (tmp_path / "camp" / "ledger.db").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    _one_line(capsys, main([cmd, str(cfg)]), "is a folder, not a ledger file")


def _tmpfs_runner() -> list[str] | None:
    """A command prefix that gives its command a private mount namespace (root, or an unprivileged user
    namespace), or None where this machine allows neither: then the fault-injected tests above stand alone."""
    if not shutil.which("unshare"):
        return None
    probe = ["unshare", "-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d && umount $d"]
    try:
        if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
            return ["unshare", "-rm"]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def test_a_real_full_disk_under_the_ledger(tmp_path):
    """The ledger on a 400 KiB tmpfs: it fills mid-campaign (a fresh ledger is ~250 KiB, 60 attempts ~620 KiB).
    One line naming the full disk (not Optuna's "invalid data" guess), exit 2, no temporary file left; the ledger
    copied off the full disk is whole, and resumes to the full budget with nothing measured twice."""
    runner = _tmpfs_runner()
    if runner is None:
        pytest.skip("no private mount namespace here (unshare -rm with a tmpfs mount is not permitted)")
    mnt, saved = tmp_path / "mnt", tmp_path / "saved"
    mnt.mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {**BASE, "budget": {"attempts": 60}, "storage": f"sqlite:///{mnt / 'camp' / 'ledger.db'}"},
            sort_keys=False,
        )
    )
    script = (
        f"mount -t tmpfs -o size=400k tmpfs {mnt} || exit 97; "
        f"{sys.executable} -m evo run {cfg} --plain > {tmp_path / 'out.txt'} 2> {tmp_path / 'err.txt'}; rc=$?; "
        f"ls -A {mnt / 'camp'} > {tmp_path / 'left.txt'}; cp -r {mnt / 'camp'} {saved}; exit $rc"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rc = subprocess.run([*runner, "sh", "-c", script], env=env, timeout=600).returncode
    err = (tmp_path / "err.txt").read_text()
    assert rc == 2, (rc, err, (tmp_path / "out.txt").read_text()[-2000:])
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evo: ") and "database or disk is full" in lines[0], err
    assert not [f for f in (tmp_path / "left.txt").read_text().split() if f.endswith(".tmp")]
    db = saved / "ledger.db"
    _check(db)
    n_full = len(Ledger(f"sqlite:///{db}", "mhc_pre_big_fuse", FAM.knobs, readonly=True).attempts())
    assert 0 < n_full < 60
    cfg.write_text(yaml.safe_dump({**BASE, "budget": {"attempts": 60}, "storage": f"sqlite:///{db}"}))
    assert (
        subprocess.run(
            [sys.executable, "-m", "evo", "run", str(cfg), "--plain"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=600,
        ).returncode
        == 0
    )
    _check(db, budget=60)


def test_status_log_export_on_a_read_only_file_system(tmp_path):
    """A ledger on a file system mounted read-only (where chmod would not stop root): status, log and export read it
    and write only where told; a run on it is refused in one line."""
    runner = _tmpfs_runner()
    if runner is None:
        pytest.skip("no private mount namespace here (unshare -rm with a tmpfs mount is not permitted)")
    src = tmp_path / "src"
    src.mkdir()
    assert main(["run", str(_cfg(src)), "--plain"]) == 0
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({**BASE, "storage": f"sqlite:///{mnt / 'ledger.db'}"}, sort_keys=False))
    evo = f"{sys.executable} -m evo"
    script = (
        f"mount -t tmpfs -o size=4m tmpfs {mnt} && cp {src / 'camp' / 'ledger.db'} {mnt}/ && "
        f"mount -o remount,ro {mnt} || exit 97; "
        f"{evo} status {cfg} > {out / 'status.txt'} 2>&1 || exit 11; "
        f"{evo} log {cfg} -o {out / 'a.md'} > /dev/null 2>&1 || exit 12; "
        f"{evo} export {cfg} -o {out / 'ex'} > /dev/null 2>&1 || exit 13; "
        f"{evo} run {cfg} --plain > /dev/null 2> {out / 'run.txt'}; echo $? > {out / 'run.rc'}; "
        f"ls -A {mnt} > {out / 'left.txt'}"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rc = subprocess.run([*runner, "sh", "-c", script], env=env, timeout=600).returncode
    assert rc == 0, (rc, *(p.read_text() for p in out.glob("*.txt")))
    assert "10 recorded" in (out / "status.txt").read_text()
    assert "#3" in (out / "a.md").read_text() and list((out / "ex").glob("*.patch"))
    assert (out / "run.rc").read_text().strip() == "2"
    (line,) = (out / "run.txt").read_text().splitlines()
    assert line.startswith("evo: ") and "read" in line, line
    assert (out / "left.txt").read_text().split() == ["ledger.db"]


def test_a_killed_runs_time_counts_against_the_time_budget(tmp_path):
    """kill -9 during a long set-up, before any attempt: the time it ran still counts (budget.minutes), up to one
    heartbeat, because each session heartbeat raises the ledger's elapsed_s (before: 0 s counted, its time lost)."""
    cfg = _cfg(tmp_path)
    script = (
        "import sys, time\n"
        "from evo.loop.campaign import Campaign\n"
        "from evo.config import load_config\n"
        "Campaign.setup = lambda self: time.sleep(60)  # a long A/A or baseline measurement\n"
        f"Campaign(load_config({str(cfg)!r}), out=lambda s: None, command='pytest').run()\n"
    )
    env = {**os.environ, "EVO_HEARTBEAT_S": "1", "EVO_GRACE_S": "3"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path)
    db = tmp_path / "camp" / "ledger.db"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not db.exists():
            time.sleep(0.2)
        time.sleep(4.5)  # about 4 heartbeats into the set-up
    finally:
        p.kill()
        p.wait(timeout=30)
    led = Ledger(f"sqlite:///{db}", "mhc_pre_big_fuse", FAM.knobs, readonly=True)
    assert led.attempts() == []
    assert 2.0 <= float(led.meta("elapsed_s") or 0.0) <= 60.0, led.meta("elapsed_s")
