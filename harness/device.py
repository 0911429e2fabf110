"""GPU facts, clock samples and an opt-in SM clock lock, through NVML (pynvml).

Timings are only comparable when the clocks behind them are known, so every
measurement can carry a `ClockSample`. Locking the SM clock (`ClockLock`) is
for users who own a dedicated GPU (config ``clocks: lock``); it is off by
default and must never be used on a shared GPU, because the lock outlives the
process unless it is reset -- hence the marker file and `restore_stale_lock`.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from evo.core.liveness import exited, process_start

try:
    import pynvml as _pynvml
except ImportError:  # facts just come back empty; constants fall back to numbers
    _pynvml = None


def _const(default: int, *names: str) -> int:
    for name in names:
        value = getattr(_pynvml, name, None)
        if isinstance(value, int):
            return value
    return default


def _reason(default: int, suffix: str) -> int:
    # NVML renamed "throttle reasons" to "clock event reasons" in 12.x; accept either.
    return _const(default, "nvmlClocksEventReason" + suffix, "nvmlClocksThrottleReason" + suffix)


REASON_NAMES: dict[int, str] = {
    _reason(0x1, "GpuIdle"): "gpu_idle",
    _reason(0x2, "ApplicationsClocksSetting"): "applications_clocks_setting",
    _reason(0x4, "SwPowerCap"): "sw_power_cap",
    _reason(0x8, "HwSlowdown"): "hw_slowdown",
    _reason(0x10, "SyncBoost"): "sync_boost",
    _reason(0x20, "SwThermalSlowdown"): "sw_thermal_slowdown",
    _reason(0x40, "HwThermalSlowdown"): "hw_thermal_slowdown",
    _reason(0x80, "HwPowerBrakeSlowdown"): "hw_power_brake_slowdown",
    _reason(0x100, "DisplayClockSetting"): "display_clock_setting",
}

# Idle, application clocks and sync boost change clocks on purpose, not because
# the GPU is over a power or thermal limit, so they don't taint a sample.
THROTTLE_MASK: int = (
    _reason(0x4, "SwPowerCap")
    | _reason(0x8, "HwSlowdown")
    | _reason(0x20, "SwThermalSlowdown")
    | _reason(0x40, "HwThermalSlowdown")
    | _reason(0x80, "HwPowerBrakeSlowdown")
)

_CLOCK_SM = _const(1, "NVML_CLOCK_SM")
_CLOCK_MEM = _const(2, "NVML_CLOCK_MEM")
_ERROR_NOT_SUPPORTED = _const(3, "NVML_ERROR_NOT_SUPPORTED")
_ERROR_NO_PERMISSION = _const(4, "NVML_ERROR_NO_PERMISSION")
_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


@dataclass
class ClockSample:
    sm_mhz: int
    mem_mhz: int
    reasons: int
    throttled: bool = field(init=False)  # derived, so it can never disagree with reasons

    def __post_init__(self) -> None:
        self.throttled = bool(self.reasons & THROTTLE_MASK)

    def describe(self) -> str:
        """Names of the set reason bits, e.g. ``"gpu_idle,sw_power_cap"``; ``"none"`` if none."""
        return reason_text(self.reasons)


def reason_text(reasons: int) -> str:
    """NVML clock-event reason bits by name, e.g. ``"gpu_idle,sw_power_cap"``; ``"none"`` if none."""
    names = [REASON_NAMES.get(1 << i, hex(1 << i)) for i in range(reasons.bit_length()) if reasons >> i & 1]
    return ",".join(names) or "none"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Nvml:
    """One GPU through NVML, addressed by its CUDA device index.

    `nvml` injects a stand-in for the pynvml module (tests). CUDA_VISIBLE_DEVICES
    is honoured; integer entries are taken as NVML indices, which matches CUDA's
    numbering only with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs.
    """

    def __init__(self, index: int = 0, nvml: ModuleType | Any | None = None):
        self.index = index
        self._nvml = nvml
        self._initialised = False
        self._handle: Any = None

    @property
    def module(self) -> Any:
        if self._nvml is None:
            if _pynvml is None:
                raise RuntimeError("pynvml is not installed (pip install nvidia-ml-py)")
            self._nvml = _pynvml
        return self._nvml

    def _init(self) -> Any:
        nv = self.module
        if not self._initialised:
            nv.nvmlInit()
            self._initialised = True
        return nv

    def handle(self) -> Any:
        if self._handle is None:
            self._handle = self._resolve(self._init())
        return self._handle

    def _resolve(self, nv: Any) -> Any:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if not entries:
            return nv.nvmlDeviceGetHandleByIndex(self.index)
        if self.index >= len(entries):
            raise IndexError(f"CUDA device {self.index} is not in CUDA_VISIBLE_DEVICES={visible}")
        entry = entries[self.index]
        if re.fullmatch(r"\d+", entry):
            return nv.nvmlDeviceGetHandleByIndex(int(entry))
        return self._by_uuid(nv, entry)

    def _by_uuid(self, nv: Any, uuid: str) -> Any:
        try:
            return nv.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:
            # CUDA also accepts a unique UUID prefix, which NVML's lookup does not.
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                if _text(nv.nvmlDeviceGetUUID(h)).startswith(uuid):
                    return h
            raise

    def available(self) -> bool:
        try:
            self.handle()
            return True
        except Exception:
            return False

    def facts(self) -> dict[str, Any]:
        """Whatever can be read about the GPU; a failing read leaves its key out."""
        facts: dict[str, Any] = {}

        def read(key: str, fn: Callable[[], Any]) -> None:
            try:
                facts[key] = fn()
            except Exception:
                pass

        try:
            nv = self._init()
        except Exception:
            return facts
        read("driver", lambda: _text(nv.nvmlSystemGetDriverVersion()))

        def cuda_driver() -> str:
            v = int(nv.nvmlSystemGetCudaDriverVersion())
            return f"{v // 1000}.{v % 1000 // 10}"

        read("cuda_driver", cuda_driver)
        try:
            h = self.handle()
        except Exception:
            return facts
        facts["cuda_index"] = self.index
        read("name", lambda: _text(nv.nvmlDeviceGetName(h)))
        read("uuid", lambda: _text(nv.nvmlDeviceGetUUID(h)))
        read("max_sm_clock_mhz", lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, _CLOCK_SM)))
        read("sm_clock_mhz", lambda: int(nv.nvmlDeviceGetClockInfo(h, _CLOCK_SM)))
        read("mem_clock_mhz", lambda: int(nv.nvmlDeviceGetClockInfo(h, _CLOCK_MEM)))
        read("power_limit_w", lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000)  # mW
        read("persistence_mode", lambda: bool(nv.nvmlDeviceGetPersistenceMode(h)))
        read("compute_mode", lambda: _COMPUTE_MODES.get(m := nv.nvmlDeviceGetComputeMode(h), str(m)))
        return facts

    def sample(self) -> ClockSample:
        nv, h = self.module, self.handle()
        try:
            reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
        except Exception:  # older pynvml or driver: only the pre-12.x name exists
            reasons = nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        return ClockSample(
            sm_mhz=int(nv.nvmlDeviceGetClockInfo(h, _CLOCK_SM)),
            mem_mhz=int(nv.nvmlDeviceGetClockInfo(h, _CLOCK_MEM)),
            reasons=int(reasons),
        )

    def uuid(self) -> str:
        return _text(self.module.nvmlDeviceGetUUID(self.handle()))

    def max_sm_clock_mhz(self) -> int:
        return int(self.module.nvmlDeviceGetMaxClockInfo(self.handle(), _CLOCK_SM))

    def lock_sm_clock(self, mhz: int) -> None:
        self.module.nvmlDeviceSetGpuLockedClocks(self.handle(), mhz, mhz)

    def reset_sm_clock(self, uuid: str | None = None) -> None:
        """Undo `lock_sm_clock`; `uuid` picks the device a marker names rather than ours."""
        nv = self._init()
        nv.nvmlDeviceResetGpuLockedClocks(self._by_uuid(nv, uuid) if uuid else self.handle())


class ClockLockError(RuntimeError):
    pass


def _permission_error(e: BaseException) -> bool:
    return getattr(e, "value", None) in (_ERROR_NO_PERMISSION, _ERROR_NOT_SUPPORTED) or type(e).__name__ in (
        "NVMLError_NoPermission",
        "NVMLError_NotSupported",
    )


_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


class ClockLock:
    """Lock the SM clock for the duration of a ``with`` block; dedicated GPUs only.

    The reset runs exactly once, on normal exit, exception, SIGINT/SIGTERM/SIGHUP
    or interpreter exit. SIGKILL can't be caught: the marker written before
    locking lets `restore_stale_lock` undo the lock on the next start.
    """

    def __init__(self, nvml: Nvml, sm_mhz: int | None, marker: Path):
        self.nvml = nvml
        self.sm_mhz = sm_mhz
        self.marker = Path(marker)
        self.mhz: int | None = None
        self._armed = False
        self._releasing = False
        self._pending: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> ClockLock:
        if self._armed:
            raise ClockLockError("cannot lock the SM clock: this ClockLock is already held")
        try:
            self.mhz = self.sm_mhz if self.sm_mhz is not None else self.nvml.max_sm_clock_mhz()
            uuid = self.nvml.uuid()
        except Exception as e:
            raise ClockLockError(f"cannot lock the SM clock: NVML unavailable ({e}); use clocks: record") from e
        self._write_marker(
            {
                "pid": os.getpid(),
                "pid_start": process_start(os.getpid()),  # with the pid, names this process (evo/core/liveness.py)
                "uuid": uuid,
                "mhz": self.mhz,
                "time": time.time(),
            }
        )
        # Arm before locking so a signal that lands in between still resets.
        self._armed = True
        self._install_handlers()
        atexit.register(self.release)
        try:
            self.nvml.lock_sm_clock(self.mhz)
        except Exception as e:
            self._disarm(reset=False)
            if _permission_error(e):
                why = "no permission" if getattr(e, "value", None) != _ERROR_NOT_SUPPORTED else "not supported"
                raise ClockLockError(
                    f"cannot lock the SM clock: {why} (needs root on a GPU you own); use clocks: record"
                ) from e
            raise ClockLockError(f"cannot lock the SM clock: {e}") from e
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Reset the clock and remove the marker; later calls do nothing."""
        self._disarm(reset=True)

    def _disarm(self, reset: bool) -> None:
        if not self._armed or self._releasing:
            return
        self._releasing = True
        try:
            if reset:
                try:
                    self.nvml.reset_sm_clock()
                except Exception as e:
                    # Keep the marker: restore_stale_lock retries once this process is gone.
                    print(
                        f"evo: could not reset the SM clock lock ({e}); marker kept at {self.marker}", file=sys.stderr
                    )
                else:
                    self.marker.unlink(missing_ok=True)
            else:
                self.marker.unlink(missing_ok=True)
        finally:
            self._restore_handlers()
            atexit.unregister(self.release)
            self._armed = self._releasing = False
            pending, self._pending = self._pending, None
        if pending is not None:
            signal.raise_signal(pending)

    def _write_marker(self, data: dict[str, Any]) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.marker.with_name(self.marker.name + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.marker)  # a crash mid-write never leaves half a marker

    def _install_handlers(self) -> None:
        for sig in _SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: atexit and __exit__ still cover us
                pass

    def _restore_handlers(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._releasing:  # interrupted our own reset: let it finish, it re-delivers
            self._pending = signum
            return
        self.release()
        # Handlers are restored now, so the signal goes where it would have without us.
        signal.raise_signal(signum)


def restore_stale_lock(nvml: Nvml, marker: Path) -> bool:
    """Undo a clock lock left by a process that died without resetting (e.g. SIGKILL).

    Returns True if a stale lock was reset; False if there is no marker or its
    process still runs. Raises ClockLockError if the reset itself fails.
    """
    marker = Path(marker)
    try:
        data = json.loads(marker.read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        data = {}  # unreadable: assume the worst, that the clocks are locked
    pid = data.get("pid")
    # A zombie can't reset anything; a different start time means the pid was reused.
    if isinstance(pid, int) and pid > 0 and not exited(pid, data.get("pid_start")):
        return False
    try:
        nvml.reset_sm_clock(data.get("uuid"))
    except Exception as e:
        raise ClockLockError(
            f"cannot reset the stale SM clock lock from pid {pid} ({e}); "
            f"run nvidia-smi -rgc as root, then delete {marker}"
        ) from e
    marker.unlink(missing_ok=True)
    return True
