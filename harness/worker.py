"""Worker isolation: the backend runs in a child process, so a bad kernel ends only that child.

An illegal address or a device-side trap poisons a CUDA context for good, and a
kernel that never returns blocks its process: neither may take the campaign
down. :class:`WorkerBackend` has the backend interface of
:class:`harness.gpu.GpuBackend`; each call is sent to a child process that owns
the real backend. When the child reports a crash, dies, or does not answer
within the call's time limit, the call raises :class:`WorkerCrash` or
:class:`WorkerTimeout` (the campaign records ``error: crash`` / ``error:
timeout``), the child is killed, and the next call starts a fresh one, which
first re-loads what it needs and re-freezes the baseline outputs.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import signal
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo.core.hooks import TRACE_ENV, read_trace
from harness.errors import HarnessError

# Calls that may legitimately run long (they are not candidates' kernels).
SLOW_CALLS = {
    "peer_torch_compile": 3600.0,
    "prepare_torch_peer": 3600.0,  # torch.compile of the reference at every geometry, before it is timed as a peer
    "copy_ceiling": 600.0,
    "facts": 120.0,
    "latency_floor": 600.0,
}


class WorkerCrash(HarnessError):
    """The worker died or reported a context-destroying failure (only the child is lost: the campaign goes on)."""

    kind = "crash"


class WorkerTimeout(HarnessError):
    """The worker did not answer within the call's time limit (a hang); it was killed."""

    kind = "timeout"


@dataclass
class RemoteLoaded:
    """A handle to a genome loaded in the worker (``built`` lets a fresh worker load it again)."""

    handle: int
    built: Any
    genome: Mapping[str, Any]
    peer: str | None = None  # a peer kernel's name (cfg.peer.kernels): the child's backend knows its family


def _child(conn, factory: str, kwargs: dict[str, Any], trace: str = "") -> None:
    """The worker's loop: build the backend, then answer (method, args) messages until told to stop. ``trace``: the
    file this worker names the family hook it runs in (evo/core/hooks.py), so that its death names the hook."""
    if trace:  # its own file: the campaign process's (evo run's watching parent reads that one) stays its own
        os.environ[TRACE_ENV] = trace
    try:
        mod, fn = factory.split(":")
        backend = getattr(importlib.import_module(mod), fn)(**kwargs)
    except Exception as e:  # the worker cannot even start: say why, once
        conn.send(("crash", f"backend did not start: {type(e).__name__}: {e}"))
        return
    from harness.gpu import KernelCrash

    loaded: dict[int, Any] = {}
    # what the campaign asks once, before any genome (the recorded backend's sub-space and floor): sent with the start
    once = {m: getattr(backend, m)() for m in ("knob_space", "recorded_floor") if callable(getattr(backend, m, None))}
    sim = {
        "simulated": bool(getattr(backend, "simulated", False)),
        "label": getattr(backend, "label", None),
        "peer_kernels": bool(getattr(backend, "peer_kernels", False)),
    }
    conn.send(("ok", {"name": backend.name, **sim, **once}))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the campaign process is gone: so is this worker's purpose
            return
        method, args, kwargs_ = msg
        if method == "stop":
            return
        try:
            if method == "load":
                handle, built, genome, peer = args
                loaded[handle] = backend.load(built, genome) if peer is None else backend.load(built, genome, peer=peer)
                result: Any = handle
            elif method == "attrs":
                result = {k: getattr(backend, k) for k in args}
            else:
                args = [loaded[a.handle] if isinstance(a, RemoteLoaded) else a for a in args]
                args = [
                    [(lb, loaded[x.handle]) if isinstance(x, RemoteLoaded) else (lb, x) for lb, x in a]
                    if method == "measure" and i == 0
                    else a
                    for i, a in enumerate(args)
                ]
                result = getattr(backend, method)(*args, **kwargs_)
            conn.send(("ok", result))
        except KernelCrash as e:
            _send_quietly(conn, ("crash", str(e)))
            return  # the CUDA context is gone: this process must end
        except (BrokenPipeError, ConnectionResetError):
            return
        except Exception as e:
            _send_quietly(conn, ("error", f"{type(e).__name__}: {e}", traceback.format_exc()))


def _send_quietly(conn, msg) -> None:
    try:
        conn.send(msg)
    except OSError:
        pass


class WorkerBackend:
    """The backend interface, served by a child process that a crash or a hang cannot outlive."""

    def __init__(self, factory: str, kwargs: Mapping[str, Any], timeout_s: float = 120.0):
        self.factory, self.kwargs, self.timeout_s = factory, dict(kwargs), timeout_s
        self._ctx = mp.get_context("spawn")  # never fork a process that may hold a CUDA context
        self._proc: Any = None  # a spawn-context Process once started
        self._conn: Any = None  # its Connection
        self._next = 0
        self._in_child: set[int] = set()
        self._handles: dict[int, RemoteLoaded] = {}
        self._freeze: RemoteLoaded | None = None
        self.baseline_hashes: dict[str, str] = {}
        self.baseline_errors: dict[str, float] = {}
        self.restarts = 0
        fd, self._trace = tempfile.mkstemp(prefix="evo-worker-", suffix=".trace")
        os.close(fd)
        info = self._start()
        self.name, self.simulated = info["name"], info["simulated"]
        self.peer_kernels = bool(info.get("peer_kernels"))  # the child's backend times peer kernels
        if info.get("label"):  # where a simulated backend's numbers come from (evo.core.records.simulated_label)
            self.label = str(info["label"])
        self._space, self._floor = info.get("knob_space"), info.get("recorded_floor")

    # --- process management --------------------------------------------------
    def _start(self) -> dict[str, Any]:
        open(self._trace, "wb").close()  # what a dead worker before this one named is not this one's
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_child, args=(child, self.factory, self.kwargs, self._trace), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._in_child = set()
        status, *rest = self._wait(SLOW_CALLS["copy_ceiling"], "start")
        if status != "ok":
            self._kill()
            raise WorkerCrash(rest[0])
        return rest[0]

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(5)
        self._proc = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop", (), {}))
                self._proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
        with contextlib.suppress(OSError):
            os.unlink(self._trace)

    def _wait(self, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            if self._conn.poll(min(0.5, max(0.0, deadline - time.monotonic()))):
                try:
                    return self._conn.recv()
                except EOFError:
                    break
            if not self._proc.is_alive():
                break
            if time.monotonic() >= deadline:
                self._kill()
                raise WorkerTimeout(f"{what} did not finish within {timeout:g} s; the worker was killed")
        self._proc.join(5)  # reap it, so the exit code is known
        code = self._proc.exitcode
        self._kill()
        raise WorkerCrash(f"the worker died during {what}{self._how(code)}")

    def _how(self, code: Any) -> str:
        """How the worker ended, naming the family hook it ran (": family X: launch() crashed (SIGSEGV)") where it
        named one: a segfault in a family's launch() reads as that, not as the harness's."""
        if not (isinstance(code, int) and code < 0):
            return f" (exit code {code})"
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        family, hook = read_trace(self._trace) if os.path.exists(self._trace) else ("", "")
        return f": family {family}: {hook or 'its code'} crashed ({sig})" if family else f" ({sig})"

    def _ensure(self) -> None:
        """A fresh worker after a crash: start it, re-freeze the baseline."""
        if self._proc is not None and self._proc.is_alive():
            return
        self.restarts += 1
        self._start()
        if self._freeze is not None:
            self._call("correctness", (self._freeze,), {"freeze": True})

    def _load_in_child(self, r: RemoteLoaded) -> None:
        if r.handle not in self._in_child:
            self._send("load", (r.handle, r.built, r.genome, r.peer), {}, self.timeout_s)
            self._in_child.add(r.handle)

    def _send(self, method: str, args: tuple, kwargs: dict, timeout: float) -> Any:
        self._conn.send((method, args, kwargs))
        status, *rest = self._wait(timeout, method)
        if status == "ok":
            return rest[0]
        if status == "crash":
            self._kill()
            raise WorkerCrash(rest[0])
        raise RuntimeError(f"{rest[0]} (in the worker)")

    def _call(self, method: str, args: tuple = (), kwargs: dict | None = None) -> Any:
        self._ensure()
        for a in args:
            if isinstance(a, RemoteLoaded):
                self._load_in_child(a)
            elif method == "measure" and isinstance(a, (list, tuple)):
                for _, x in a:
                    if isinstance(x, RemoteLoaded):
                        self._load_in_child(x)
        return self._send(method, args, kwargs or {}, SLOW_CALLS.get(method, self.timeout_s))

    # --- the backend interface ----------------------------------------------------
    def facts(self) -> dict[str, Any]:
        return self._call("facts")

    def copy_ceiling(self, **kwargs: Any) -> dict[str, float]:
        return self._call("copy_ceiling", (), kwargs)

    def load(self, built: Any, genome: Mapping[str, Any], peer: str | None = None) -> RemoteLoaded:
        self._next += 1
        r = RemoteLoaded(self._next, built, dict(genome), peer)
        self._handles[r.handle] = r
        return r

    def correctness(self, loaded: RemoteLoaded, *, freeze: bool = False):
        ev = self._call("correctness", (loaded,), {"freeze": freeze})
        if freeze:
            self._freeze = loaded
            attrs = self._call("attrs", ("baseline_hashes", "baseline_errors"))
            self.baseline_hashes, self.baseline_errors = attrs["baseline_hashes"], attrs["baseline_errors"]
        return ev

    def recheck(self, loaded: RemoteLoaded) -> str | None:
        return self._call("recheck", (loaded,))

    def launches_for(self, loaded: RemoteLoaded, g: Any) -> int:
        return self._call("launches_for", (loaded, g))

    def measure(
        self,
        parts: Sequence[tuple[str, RemoteLoaded]],
        g: Any,
        rounds: int,
        launches: int | Mapping[str, int] | None = None,
        stop: Any = None,
    ):
        return self._call("measure", (list(parts), g, rounds, launches), {"stop": stop} if stop is not None else {})

    def peer_torch_compile(self, mode: str, geometries: Sequence[Any]) -> dict[str, Any]:
        return self._call("peer_torch_compile", (mode, list(geometries)))

    def prepare_torch_peer(self, loaded: RemoteLoaded, geometries: Sequence[Any]) -> dict[str, Any]:
        return self._call("prepare_torch_peer", (loaded, list(geometries)))

    def latency_floor(self, grids: Mapping[str, Any], rounds: int = 12, pdl: bool = False) -> dict[str, Any]:
        return self._call("latency_floor", (dict(grids), rounds, pdl))

    def knob_space(self) -> dict[str, list[Any]] | None:
        """The child backend's measurable sub-space (harness/recorded.py), as it said at start; None: every value."""
        return self._space

    def recorded_floor(self) -> dict[str, Any] | None:
        return self._floor
