"""Issue 45 ("Nothing lost, round two"), the two cases the earlier rounds left: a family's code that crashes the
`evo run` process (a segfault in a hook), and a stop request while another program holds the ledger's lock mid-run.

Each test reproduces its case on the code before the fix."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evo.ledger.ledger import Ledger
from tests.test_nothing_lost_round2 import FAM, _shipped_family_with, _wait_or_fail, one_line, recorded_config
from tests.test_nothing_lost_round2 import evo as evo_cmd

ROOT = Path(__file__).resolve().parent.parent

# launch() of the first genome after the baseline segfaults once (a marker file says it did)
_CRASH_ONCE = (
    "import ctypes, os\n"
    "_l = MhcPreBigFuse.launch\n"
    "def _x(self, g, geo):\n"
    "    if g != self.baseline() and not os.path.exists({mark!r}):\n"
    "        open({mark!r}, 'w').close()\n"
    "        ctypes.string_at(0)\n"
    "    return _l(self, g, geo)\n"
    "MhcPreBigFuse.launch = _x\n"
)


def _campaign(cfg: Path) -> str:
    import yaml

    return str(yaml.safe_load(cfg.read_text())["campaign"])


@pytest.mark.parametrize("backend", ["recorded", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_a_hook_that_segfaults_in_evo_run_is_a_recorded_verdict_and_the_campaign_goes_on(tmp_path, backend):
    """Before: the segfault ended `evo run` itself (exit -11, no word); the attempt was left for the next run."""
    mark = tmp_path / "crashed"
    cfg = _shipped_family_with(tmp_path, _CRASH_ONCE.format(mark=str(mark)))
    cfg.write_text(cfg.read_text().replace("backend: recorded", f"backend: {backend}"))
    r = evo_cmd("run", str(cfg), "--plain", "--attempts", "5", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert mark.exists(), out[-3000:]
    assert r.returncode == 0, (r.returncode, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    said = [ln for ln in r.stderr.splitlines() if "SIGSEGV" in ln]
    assert len(said) == 1 and "launch()" in said[0] and "family mhc_pre_big_fuse" in said[0], r.stderr[-3000:]
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", _campaign(cfg), FAM.knobs)
    attempts = led.attempts()
    crashed = [a for a in attempts if a.verdict.kind == "crash"]
    assert len(crashed) == 1, [(a.id, a.verdict.kind, a.verdict.reason) for a in attempts]
    assert "SIGSEGV" in crashed[0].verdict.reason and "launch()" in crashed[0].verdict.reason
    assert not [a for a in attempts if a.verdict.kind == "interrupted"]
    assert len(attempts) == 5  # the crash counts as one attempt of the budget; the rest were measured


def test_no_compile_process_outlives_a_campaign_process_that_segfaulted(tmp_path):
    """Before: on an H100 the gpu case above never returned: the compile-ahead process (worker.prefetch, on by
    default on a GPU) outlived the campaign process that segfaulted, holding `evo run`'s stdout, so whatever read
    it (this test's subprocess.run) waited for ever. Here the recorded backend with prefetch set as a GPU sets it."""
    mark = tmp_path / "crashed"
    cfg = _shipped_family_with(tmp_path, _CRASH_ONCE.format(mark=str(mark)))
    text = cfg.read_text()
    assert "worker: {timeout_s: 30}" in text
    cfg.write_text(text.replace("worker: {timeout_s: 30}", "worker: {timeout_s: 30, prefetch: 1}"))
    r = evo_cmd("run", str(cfg), "--plain", "--attempts", "5", cwd=tmp_path, timeout=120)  # raises if it hangs
    assert mark.exists() and r.returncode == 0, (r.returncode, r.stderr[-3000:])
    said = [ln for ln in r.stderr.splitlines() if "SIGSEGV" in ln]
    assert len(said) == 1 and "launch()" in said[0], r.stderr[-3000:]


def test_a_hook_that_segfaults_outside_an_attempt_is_one_line_and_what_was_recorded_is_kept(tmp_path):
    """Before: `evo run` died by SIGSEGV with no word (exit -11). A crash outside an attempt (here the proposer's
    check()) would crash again at once: one line naming the family and the hook, exit 2."""
    code = (
        "import ctypes\n"
        "MhcPreBigFuse.check = lambda self, g, geos: ctypes.string_at(0) if g != self.baseline() else None"
    )
    cfg = _shipped_family_with(tmp_path, code)
    r = evo_cmd("run", str(cfg), "--plain", cwd=tmp_path)
    line = one_line(r, "SIGSEGV", rc=2)
    assert "family mhc_pre_big_fuse" in line and "check()" in line
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", _campaign(cfg), FAM.knobs)
    assert len(led.attempts()) >= 1  # the baseline, recorded before the crash, is kept


def test_evo_run_forwards_one_stop_to_its_watched_child(tmp_path):
    """A SIGTERM to the `evo run` the user started stops the campaign once (not "at once by a second SIGTERM")."""
    marker = tmp_path / "looping"
    spin = (
        f"def _spin():\n    open({str(marker)!r}, 'w').close()\n    while True:\n        pass\n"
        "_l = MhcPreBigFuse.launch\ndef _x(self, g, geo):\n    if g != self.baseline(): _spin()\n"
        "    return _l(self, g, geo)\nMhcPreBigFuse.launch = _x\n"
    )
    cfg = _shipped_family_with(tmp_path, spin)
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
    proc.send_signal(signal.SIGTERM)
    rc = _wait_or_fail(proc, 10)
    out, err = proc.communicate()
    assert rc == 128 + signal.SIGTERM, (rc, out[-2000:], err[-2000:])
    assert "second" not in err and "stopped by SIGTERM" in err, err[-2000:]
    assert err.count("stopped by SIGTERM") == 1, err[-2000:]


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the lock's holder is read from Linux's /proc/locks")
def test_a_stop_while_another_program_holds_the_ledgers_lock_mid_run_is_honoured_and_names_the_holder(tmp_path):
    """Before: SQLite's busy wait (30 s a statement, in C) held the stop request, a second one too; the user was not
    told why. Now: within about a second, one line naming the holder; what was recorded is kept."""
    cfg = recorded_config(tmp_path, attempts=100000)
    db = tmp_path / "ledger.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evo", "run", str(cfg), "--plain", "--minutes", "30"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for _ in range(4):  # the campaign line, the baseline's, then attempts: the loop writes the ledger now
        assert proc.stdout.readline(), proc.communicate()
    con = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        con.execute("BEGIN EXCLUSIVE")
        time.sleep(1.5)  # the run's next write waits for the lock
        proc.send_signal(signal.SIGTERM)
        rc = _wait_or_fail(proc, 12)
        out, err = proc.communicate()
    finally:
        con.execute("ROLLBACK")
        con.close()
    assert rc == 128 + signal.SIGTERM, (rc, err[-2000:])
    assert "Traceback" not in out + err and "damaged" not in err, err[-2000:]
    said = [ln for ln in err.splitlines() if ln.strip()]
    assert len(said) == 1 and f"pid {os.getpid()} (" in said[0] and "holds the ledger's lock" in said[0], err
    before = len(Ledger(f"sqlite:///{db}", _campaign(cfg), FAM.knobs).attempts())
    r = evo_cmd("run", str(cfg), "--plain", "--attempts", str(before + 2), cwd=tmp_path)  # resumes as ever
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert len(Ledger(f"sqlite:///{db}", _campaign(cfg), FAM.knobs).attempts()) >= before + 2


def test_evo_run_of_a_family_whose_import_loops_honours_the_first_stop(tmp_path):
    """Before: the stop request was only recorded while family.py's import looped: `evo run` needed a second signal
    (the import is no hook call: no `calling` around it)."""
    marker = tmp_path / "importing"
    cfg = _shipped_family_with(tmp_path, f"open({str(marker)!r}, 'w').close()\nwhile True:\n    pass")
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
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = _wait_or_fail(proc, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate()
    assert rc == 128 + signal.SIGTERM, (rc, err[-2000:])
    assert "Traceback" not in out + err and "stopped by SIGTERM" in err and "second" not in err, err[-2000:]


def test_an_e2e_command_that_segfaults_is_named_as_a_crash(tmp_path):
    """Before: "exit status -11" (a user reads a status, not a crash); now the signal is named: "crashed (SIGSEGV)"."""
    from evo.measure.e2e import E2EError, run_e2e

    code = "import ctypes, sys; sys.stderr.write('loading the model\\n'); sys.stderr.flush(); ctypes.string_at(0)"
    with pytest.raises(E2EError, match=r"crashed \(SIGSEGV\); last stderr line: loading the model") as e:
        run_e2e([sys.executable, "-c", code], None, timeout_s=60)
    assert "\n" not in str(e.value) and "-11" not in str(e.value)
