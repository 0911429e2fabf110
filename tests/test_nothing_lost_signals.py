"""SIGTERM and SIGINT at random moments of start-up, the loop and shutdown: the exit code says so (143 / 130), one
line and no traceback, and the ledger, resumed each time, loses, changes and duplicates nothing.

A signal is sent once the process has taken SIGINT and SIGTERM (read from /proc/<pid>/status): before that the
interpreter itself is still starting, and no code of evo's runs that could answer it.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from test_kill_resume import BUDGET, Run, _check_ledger_api, _check_raw_sql, _config

HAVE_PROC = Path("/proc/self/status").is_file()


def _caught(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def _wait_for_handlers(run: Run, timeout: float = 60) -> bool:
    """Until evo's handlers are in (after exec: before it the forked child shows pytest's)."""
    want = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    end = time.monotonic() + timeout
    while time.monotonic() < end and run.proc.poll() is None:
        try:
            evo = b"-m\0evo\0" in Path(f"/proc/{run.proc.pid}/cmdline").read_bytes()
        except OSError:
            evo = False
        if evo and _caught(run.proc.pid) & want == want:
            return True
        time.sleep(0.002)
    return False


# the phase each signal aims at, in order: start-up and the loop while the budget lasts, then shutdown
PHASES = ["startup", "loop"] * 7 + ["shutdown"] * 8


@pytest.mark.skipif(not HAVE_PROC, reason="needs /proc to see when the process has taken the signals")
def test_signals_at_random_moments_then_resume(tmp_path):
    cfg, db = _config(tmp_path)
    rng = random.Random(20261202)
    # observed windows (s), refreshed from the runs: handlers in -> ledger open, one attempt, stopped line -> exit
    window = {"startup": 1.0, "loop": 0.5, "shutdown": 0.5}
    seen = {"startup": 0, "loop": 0, "shutdown": 0, "finished": 0}
    for i, phase in enumerate(PHASES):
        sig = signal.SIGINT if i % 10 == 9 else signal.SIGTERM  # 20 SIGTERM, 2 SIGINT
        run = Run(cfg)
        assert _wait_for_handlers(run), run.finish()
        t_ready = time.monotonic() - run.t0
        anchor = {"startup": None, "loop": "#", "shutdown": "evo: stopped: "}[phase]
        if anchor is not None:
            run.wait_for(anchor, timeout=60)
        time.sleep(rng.uniform(0.0, window[phase]))
        alive = run.proc.poll() is None
        if alive:
            run.proc.send_signal(sig)
        out = run.finish()
        rc = run.proc.returncode
        assert "Traceback" not in out and "Exception ignored" not in out, f"run {i}:\n{out[-3000:]}"
        lines = out.splitlines()
        stop_lines = [ln for ln in lines if ln.startswith("evo: stopped by ")]
        if rc == 0:  # it had ended (or was ending, past every check) before the signal
            assert "evo: attempt log:" in out and not stop_lines, f"run {i}:\n{out[-3000:]}"
            seen["finished"] += 1
        else:
            assert alive and rc == 128 + sig, f"run {i}: rc {rc} after {sig!r}:\n{out[-3000:]}"
            assert stop_lines == [
                f"evo: stopped by {signal.Signals(sig).name}; what was recorded is kept (the same "
                "command resumes a campaign)"
            ], out[-3000:]
            assert lines[-1] == stop_lines[0]  # the last word, and only once
            where = (
                "startup"
                if not any(ln.startswith("#") for ln in lines)
                else "loop"
                if "interrupted by the user" in out
                else "shutdown"
            )
            seen[where] += 1
        opened, stopped = run.when("evo: campaign"), run.when("evo: stopped: ")
        if opened is not None:
            window["startup"] = max(0.05, opened - t_ready)
        if rc == 0 and stopped is not None:
            window["shutdown"] = max(0.05, run.lines[-1][0] - stopped)
        if db.exists():
            con = sqlite3.connect(db)
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            con.close()
    final = Run(cfg)
    out = final.finish(timeout=150)
    assert final.proc.returncode == 0, out[-3000:]
    assert f"({BUDGET}/{BUDGET})" in out, out[-3000:]
    print("where the signals landed:", seen)
    assert seen["startup"] and seen["loop"] and seen["shutdown"]
    _check_ledger_api(cfg)
    _check_raw_sql(db)
