"""harness.device against a fake NVML (no GPU needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pynvml
import pytest

from evo.core.liveness import process_start
from harness import device
from harness.device import THROTTLE_MASK, ClockLock, ClockLockError, ClockSample, Nvml, restore_stale_lock

ROOT = Path(__file__).resolve().parents[1]
UUIDS = ("GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-cccc-2222")


class FakeNvml:
    """The pynvml functions harness.device uses; records calls (and appends them to `log`)."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(
        self,
        log: str | Path | None = None,
        fail: set[str] = frozenset(),
        reasons: int = 0,
        lock_error: int | None = None,
        init_error: bool = False,
    ):
        self.calls: list[tuple[Any, ...]] = []
        self.log, self.fail, self.reasons = log, set(fail), reasons
        self.lock_error, self.init_error = lock_error, init_error

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, *args))
        if self.log:
            with open(self.log, "a") as f:
                f.write(" ".join(map(str, (name, *args))) + "\n")
        if name in self.fail:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.init_error:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(UUIDS)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        self._call("nvmlDeviceGetHandleByIndex", i)
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        self._call("nvmlDeviceGetHandleByUUID", uuid)
        if uuid not in UUIDS:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return UUIDS.index(uuid)

    def nvmlDeviceGetName(self, h: int) -> bytes:
        self._call("nvmlDeviceGetName", h)
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: int) -> str:
        self._call("nvmlDeviceGetUUID", h)
        return UUIDS[h]

    def nvmlSystemGetDriverVersion(self) -> bytes:
        self._call("nvmlSystemGetDriverVersion")
        return b"580.65.06"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._call("nvmlSystemGetCudaDriverVersion")
        return 13000

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        self._call("nvmlDeviceGetMaxClockInfo", h, kind)
        return 1980 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        self._call("nvmlDeviceGetClockInfo", h, kind)
        return 1755 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        self._call("nvmlDeviceGetPowerManagementLimit", h)
        return 700000

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        self._call("nvmlDeviceGetPersistenceMode", h)
        return 1

    def nvmlDeviceGetComputeMode(self, h: int) -> int:
        self._call("nvmlDeviceGetComputeMode", h)
        return 3

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        return self.reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return self.reasons

    def nvmlDeviceSetGpuLockedClocks(self, h: int, lo: int, hi: int) -> None:
        self._call("nvmlDeviceSetGpuLockedClocks", h, lo, hi)
        if self.lock_error is not None:
            raise pynvml.NVMLError(self.lock_error)

    def nvmlDeviceResetGpuLockedClocks(self, h: int) -> None:
        self._call("nvmlDeviceResetGpuLockedClocks", h)


LOCK, RESET = "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"


@pytest.fixture(autouse=True)
def _no_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# -- throttle classification -------------------------------------------------


def test_throttle_mask_bits() -> None:
    assert THROTTLE_MASK == 0x4 | 0x8 | 0x20 | 0x40 | 0x80


@pytest.mark.parametrize("reasons", [0x0, 0x1, 0x2, 0x10, 0x1 | 0x2 | 0x10, 0x100])
def test_not_throttled(reasons: int) -> None:
    assert not ClockSample(1980, 3201, reasons).throttled


@pytest.mark.parametrize("reasons", [0x4, 0x8, 0x20, 0x40, 0x80, 0x1 | 0x4])
def test_throttled(reasons: int) -> None:
    assert ClockSample(1500, 3201, reasons).throttled


def test_describe() -> None:
    assert ClockSample(1, 1, 0).describe() == "none"
    assert ClockSample(1, 1, 0x1 | 0x4).describe() == "gpu_idle,sw_power_cap"
    assert ClockSample(1, 1, 0x800).describe() == "0x800"


def test_sample_falls_back_to_throttle_reasons() -> None:
    fake = FakeNvml(reasons=0x20)
    s = Nvml(nvml=fake).sample()
    assert (s.sm_mhz, s.mem_mhz, s.reasons, s.throttled) == (1755, 3201, 0x20, True)
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" not in fake.names()

    fake = FakeNvml(reasons=0x1, fail={"nvmlDeviceGetCurrentClocksEventReasons"})
    s = Nvml(nvml=fake).sample()
    assert s.reasons == 0x1 and not s.throttled
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.names()


# -- facts -------------------------------------------------------------------


def test_facts_all() -> None:
    assert Nvml(nvml=FakeNvml()).facts() == {
        "driver": "580.65.06",
        "cuda_driver": "13.0",
        "cuda_index": 0,
        "name": "NVIDIA H200",
        "uuid": UUIDS[0],
        "max_sm_clock_mhz": 1980,
        "sm_clock_mhz": 1755,
        "mem_clock_mhz": 3201,
        "power_limit_w": 700.0,
        "persistence_mode": True,
        "compute_mode": "exclusive_process",
    }


def test_facts_with_failing_calls() -> None:
    fake = FakeNvml(
        fail={
            "nvmlDeviceGetName",
            "nvmlDeviceGetPowerManagementLimit",
            "nvmlSystemGetCudaDriverVersion",
            "nvmlDeviceGetComputeMode",
        }
    )
    facts = Nvml(nvml=fake).facts()
    assert not {"name", "power_limit_w", "cuda_driver", "compute_mode"} & facts.keys()
    assert facts["uuid"] == UUIDS[0] and facts["driver"] == "580.65.06" and facts["sm_clock_mhz"] == 1755


def test_facts_without_nvml() -> None:
    nv = Nvml(nvml=FakeNvml(init_error=True))
    assert nv.facts() == {} and not nv.available()
    nv = Nvml(nvml=FakeNvml(fail={"nvmlDeviceGetHandleByIndex"}))
    assert nv.facts() == {"driver": "580.65.06", "cuda_driver": "13.0"} and not nv.available()


# -- CUDA_VISIBLE_DEVICES ----------------------------------------------------


@pytest.mark.parametrize(
    "visible,index,expected",
    [
        (None, 1, UUIDS[1]),
        ("2,0", 0, UUIDS[2]),
        ("2, 0", 1, UUIDS[0]),
        (f"{UUIDS[1]},{UUIDS[0]}", 0, UUIDS[1]),
        ("GPU-cccc", 0, UUIDS[2]),  # CUDA accepts a UUID prefix
    ],
)
def test_visible_devices(monkeypatch: pytest.MonkeyPatch, visible: str | None, index: int, expected: str) -> None:
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    fake = FakeNvml()
    assert Nvml(index, nvml=fake).uuid() == expected
    assert ("nvmlDeviceGetHandleByUUID" in fake.names()) == (visible is not None and "GPU" in visible)


def test_visible_devices_out_of_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert not Nvml(1, nvml=FakeNvml()).available()


# -- ClockLock in process ----------------------------------------------------


def _handlers() -> list[Any]:
    return [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]


def test_lock_and_reset_on_normal_exit(tmp_path: Path) -> None:
    fake, marker, before = FakeNvml(), tmp_path / "run" / "clock.lock", _handlers()
    with ClockLock(Nvml(nvml=fake), None, marker) as lock:
        data = json.loads(marker.read_text())
        assert data["pid"] == os.getpid() and data["uuid"] == UUIDS[0] and data["mhz"] == 1980
        assert lock.mhz == 1980 and fake.calls[-1] == (LOCK, 0, 1980, 1980)
        assert _handlers() != before
    assert fake.names().count(RESET) == 1 and fake.calls[-1] == (RESET, 0)
    assert not marker.exists() and _handlers() == before


def test_marker_written_before_lock(tmp_path: Path) -> None:
    marker = tmp_path / "clock.lock"

    class Checking(FakeNvml):
        def nvmlDeviceSetGpuLockedClocks(self, h: int, lo: int, hi: int) -> None:
            assert marker.exists()
            super().nvmlDeviceSetGpuLockedClocks(h, lo, hi)

    with ClockLock(Nvml(nvml=Checking()), 1500, marker):
        pass


def test_reset_on_exception(tmp_path: Path) -> None:
    fake, marker, before = FakeNvml(), tmp_path / "clock.lock", _handlers()
    with pytest.raises(ZeroDivisionError):
        with ClockLock(Nvml(nvml=fake), 1500, marker):
            1 / 0  # noqa: B018 (raises on purpose)
    assert (LOCK, 0, 1500, 1500) in fake.calls and fake.names().count(RESET) == 1
    assert not marker.exists() and _handlers() == before


def test_reset_exactly_once_with_atexit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[Any] = []
    monkeypatch.setattr(device.atexit, "register", registered.append)
    fake = FakeNvml()
    with ClockLock(Nvml(nvml=fake), 1500, tmp_path / "clock.lock"):
        pass
    assert len(registered) == 1
    registered[0]()  # interpreter exit after the with block already reset
    assert fake.names().count(RESET) == 1


def test_signal_chains_to_previous_handler(tmp_path: Path) -> None:
    seen: list[int] = []
    original = signal.signal(signal.SIGHUP, lambda signum, frame: seen.append(signum))
    try:
        fake = FakeNvml()
        with ClockLock(Nvml(nvml=fake), 1500, tmp_path / "clock.lock"):
            os.kill(os.getpid(), signal.SIGHUP)
            assert fake.names().count(RESET) == 1 and seen == [signal.SIGHUP]
        assert fake.names().count(RESET) == 1 and not (tmp_path / "clock.lock").exists()
    finally:
        signal.signal(signal.SIGHUP, original)


def test_sigint_still_raises_keyboard_interrupt(tmp_path: Path) -> None:
    original = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        fake = FakeNvml()
        with pytest.raises(KeyboardInterrupt):
            with ClockLock(Nvml(nvml=fake), 1500, tmp_path / "clock.lock"):
                os.kill(os.getpid(), signal.SIGINT)
        assert fake.names().count(RESET) == 1
    finally:
        signal.signal(signal.SIGINT, original)


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVML_ERROR_NOT_SUPPORTED])
def test_no_permission(tmp_path: Path, code: int) -> None:
    fake, marker, before = FakeNvml(lock_error=code), tmp_path / "clock.lock", _handlers()
    with pytest.raises(ClockLockError) as info:
        with ClockLock(Nvml(nvml=fake), 1500, marker):
            pytest.fail("entered without a lock")
    message = str(info.value)
    assert "\n" not in message and message.endswith("(needs root on a GPU you own); use clocks: record")
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        assert message == ("cannot lock the SM clock: no permission (needs root on a GPU you own); use clocks: record")
    assert RESET not in fake.names() and not marker.exists() and _handlers() == before


def test_unavailable_nvml(tmp_path: Path) -> None:
    with pytest.raises(ClockLockError, match="NVML unavailable"):
        with ClockLock(Nvml(nvml=FakeNvml(init_error=True)), None, tmp_path / "clock.lock"):
            pass
    assert not (tmp_path / "clock.lock").exists()


# -- ClockLock across processes ----------------------------------------------

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from test_device import FakeNvml
    from harness.device import ClockLock, Nvml

    log, marker, mode = sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    name, _, how = mode.partition(":")
    if name in ("SIGTERM", "SIGHUP"):  # the disposition the lock finds, whatever the runner's (nohup ignores SIGHUP)
        signal.signal(getattr(signal, name), signal.SIG_IGN if how == "ignored" else signal.SIG_DFL)
    lock = ClockLock(Nvml(nvml=FakeNvml(log=log)), 1500, marker)
    if mode == "atexit":
        lock.__enter__()  # never exited: only atexit can reset
        sys.exit(0)
    with lock:
        os.kill(os.getpid(), getattr(signal, name))
        time.sleep(0.2 if how == "ignored" else 5)
    sys.exit(3)  # the signal should have killed us, unless it is ignored
""")


def _child(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], list[str], Path]:
    script, log, marker = tmp_path / "child.py", tmp_path / "calls.log", tmp_path / "clock.lock"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(ROOT / "tests"), str(log), str(marker), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = [line.split()[0] for line in log.read_text().splitlines() if line.split()[0] in (LOCK, RESET)]
    return proc, calls, marker


@pytest.mark.parametrize("mode", ["SIGTERM", "SIGHUP"])
def test_fatal_signal_in_child(tmp_path: Path, mode: str) -> None:
    proc, calls, marker = _child(tmp_path, mode)
    assert proc.returncode == -getattr(signal, mode), proc.stderr
    assert calls == [LOCK, RESET] and not marker.exists()


def test_ignored_signal_in_child_still_resets_once(tmp_path: Path) -> None:
    """A signal the process ignores (SIGHUP under nohup) resets the clocks and goes on being ignored."""
    proc, calls, marker = _child(tmp_path, "SIGHUP:ignored")
    assert proc.returncode == 3, proc.stderr
    assert calls == [LOCK, RESET] and not marker.exists()


def test_atexit_in_child(tmp_path: Path) -> None:
    proc, calls, marker = _child(tmp_path, "atexit")
    assert proc.returncode == 0, proc.stderr
    assert calls == [LOCK, RESET] and not marker.exists()


def test_sigkill_leaves_marker_then_restore(tmp_path: Path) -> None:
    proc, calls, marker = _child(tmp_path, "SIGKILL")
    assert proc.returncode == -signal.SIGKILL and calls == [LOCK] and marker.exists()
    fake = FakeNvml()
    assert restore_stale_lock(Nvml(nvml=fake), marker)
    assert fake.calls[-1] == (RESET, 0) and not marker.exists()
    assert not restore_stale_lock(Nvml(nvml=fake), marker)  # nothing left to restore
    assert fake.names().count(RESET) == 1


def test_restore_leaves_live_lock_alone(tmp_path: Path) -> None:
    marker, fake = tmp_path / "clock.lock", FakeNvml()
    marker.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "pid_start": process_start(os.getpid()),
                "uuid": UUIDS[1],
                "mhz": 1500,
                "time": 0,
            }
        )
    )
    assert not restore_stale_lock(Nvml(nvml=fake), marker) and marker.exists() and RESET not in fake.names()
    # Same pid, different start time: the pid was reused, so the lock is stale.
    marker.write_text(json.dumps({"pid": os.getpid(), "pid_start": "1", "uuid": UUIDS[1]}))
    assert restore_stale_lock(Nvml(nvml=fake), marker) and fake.calls[-1] == (RESET, 1)


def test_restore_failure_is_loud(tmp_path: Path) -> None:
    marker = tmp_path / "clock.lock"
    marker.write_text("{broken")
    with pytest.raises(ClockLockError, match="cannot reset the stale SM clock lock"):
        restore_stale_lock(Nvml(nvml=FakeNvml(fail={RESET})), marker)
    assert marker.exists()
