"""Process liveness is written once (evo/core/liveness.py) and answers as the ledger and the clock lock need it:
dead only where surely exited, a reused pid read as the old process gone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evo.core import liveness

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "evo" / "core" / "liveness.py"
PRODUCT = ("evo", "harness", "gates", "tools", "candidates")
# What asking the kernel whether a process lives looks like: its /proc entry, the signal-0 probe, the boot id and
# pid namespace that tell whether a pid means anything here.
PROBE = re.compile(r"""/proc/|os\.kill\([^,()]+,\s*0\)|boot_id|ns/pid""")

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


def _probes(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if PROBE.search(line)]


def test_liveness_has_one_implementation():
    offenders = []
    for top in PRODUCT:
        for f in sorted((ROOT / top).rglob("*.py")):
            if f != HOME:
                offenders += [f"{f.relative_to(ROOT)}: {line}" for line in _probes(f.read_text())]
    assert not offenders, "process liveness outside evo/core/liveness.py:\n" + "\n".join(offenders)
    assert _probes(HOME.read_text())  # the scan looks for what the one implementation does


def test_the_scan_catches_each_way_of_asking():
    for line in ('Path(f"/proc/{pid}").exists()', "os.kill(pid, 0)", 'read("/proc/sys/kernel/random/boot_id")'):
        assert _probes(line), line
    assert not _probes("os.kill(pid, signal.SIGKILL)")


def test_the_ledger_and_the_clock_lock_ask_the_one_implementation():
    from evo.ledger import sessions, sqlite_file
    from harness import device

    assert device.exited is liveness.exited and device.process_start is liveness.process_start
    assert sqlite_file.exited is liveness.exited
    assert sessions.liveness is liveness


def _exited_child() -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while (st := liveness.proc_stat(child.pid)) is not None and st[0] not in ("Z", "X"):
        time.sleep(0.01)
    return child


def test_exited():
    me = os.getpid()
    start = liveness.process_start(me)
    assert start is not None
    assert not liveness.exited(me, start) and not liveness.exited(me, None)
    assert liveness.exited(me, str(int(start) + 1))  # the pid now names another process: the old one is gone
    child = _exited_child()  # not reaped yet: a zombie
    assert liveness.exited(child.pid, None)
    child.wait()  # reaped: no such pid
    assert liveness.exited(child.pid, None)
    assert liveness.exited(0, None) and liveness.exited(-1, None) and liveness.exited(2**40, None)


def test_certainly_dead_only_on_this_kernel():
    me = liveness.identity()
    assert me["pid"] == os.getpid() and me["start"] == liveness.process_start(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = {**me, "pid": child.pid, "start": liveness.process_start(child.pid) or "1"}
    child.wait()
    assert liveness.certainly_dead(owner)
    assert not liveness.certainly_dead({**owner, "boot": "another-boot"})  # another host: the heartbeat decides
    assert not liveness.certainly_dead({**owner, "pidns": "pid:[1]"})  # another container
    assert not liveness.certainly_dead({**owner, "start": None})
    assert not liveness.certainly_dead({**me, "start": "1"}) and liveness.certainly_dead(me)
