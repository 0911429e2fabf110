"""The seams of the campaign loop (evo/loop/campaign.py): what a backend, a gate and a storage must offer.

Core types: this module imports nothing of evo above the records, so a backend in ``harness/``, a gate, a test's
stand-in or a benchmark can implement them (structurally: no base class to inherit). Each method's docstring says
when the loop calls it. ``Campaign`` takes any of them in place of its defaults (``backend=``, ``gates=``,
``storage=``), as an Optuna study takes a sampler and a storage.

The loop, once per attempt: the proposer proposes a genome; the storage reserves it (``ask``); the gates judge it
in ``Campaign.gates`` order, each calling the backend for the evidence it needs, until one gives a verdict that is
not a pass; the storage records the attempt (``record``). A worker is the same loop on a shared storage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from evo.core.records import Attempt, Verdict


@runtime_checkable
class Backend(Protocol):
    """Where candidates run and are timed: ``harness.gpu.GpuBackend``, ``harness.recorded.RecordedBackend`` (a
    recorded sweep), ``harness.worker.WorkerBackend`` (either, in a child process). Registered by name in
    evo/backends.py. Failures raise a ``harness.HarnessError`` subclass, which the loop records as an error
    verdict; anything else is a bug and ends the run after it is recorded."""

    name: str  # recorded with every attempt and in the campaign's meta ("gpu", "recorded")
    simulated: bool  # True: every line a user reads says the numbers are recorded ones
    baseline_hashes: dict[str, str]  # "geometry/seed/output" -> the frozen baseline's hash (set by correctness)
    baseline_errors: dict[str, float]  # the same keys -> the baseline's error against float64

    def facts(self) -> dict[str, Any]:
        """The device, driver and library facts; once per session, in set-up (the ledger's ``device`` meta)."""
        ...

    def copy_ceiling(self) -> dict[str, float]:
        """The measured copy ceiling; once, at a new campaign's set-up (a resume reads it from the ledger)."""
        ...

    def load(self, built: Any, genome: Mapping[str, Any]) -> Any:
        """A built genome made ready to run (``built`` is None where the backend needs no machine code); once per
        genome: the loop keeps what it returns and hands it to the calls below."""
        ...

    def correctness(self, loaded: Any, *, freeze: bool = False) -> Any:
        """The correctness evidence (``gates.CorrectnessEvidence``) of a loaded genome; by the correctness gate,
        and once in set-up for the baseline with ``freeze=True`` (which sets ``baseline_hashes``)."""
        ...

    def recheck(self, loaded: Any) -> str | None:
        """Why the outputs moved after timing, or None; by the recheck gate, for an accepted attempt only."""
        ...

    def launches_for(self, loaded: Any, geometry: Any) -> int:
        """Launches in one timed graph of this genome (about ``batch_ms``); once per genome and geometry."""
        ...

    def measure(
        self,
        parts: Sequence[tuple[str, Any]],
        geometry: Any,
        rounds: int,
        launches: int | Mapping[str, int] | None = None,
        stop: Any = None,
    ) -> Any:
        """Interleaved samples (``harness.gpu.Samples``) of the labelled loaded parts at one geometry; by the perf
        gate per geometry, by the A/A noise floor in set-up, and by the ceiling check as a run ends. ``stop``
        (``gates.EarlyStop``) may end the rounds early."""
        ...

    def peer_torch_compile(self, mode: str, geometries: Sequence[Any]) -> dict[str, Any]:
        """torch.compile of the reference, timed once per campaign in set-up (unless ``peer.torch_compile: off``)."""
        ...


@runtime_checkable
class PeerKernelBackend(Protocol):
    """A backend that also runs peer kernels (``peer.kernels``: other families' kernels of the campaign's problem,
    evo/measure/peer_kernels.py), a capability beside :class:`Backend`: ``harness.gpu.GpuBackend`` and a worker of
    one. The loop asks ``peer_kernels`` before it loads a peer; a backend without it (the recorded one) leaves the
    peers untimed and the log says so."""

    peer_kernels: bool

    def load(self, built: Any, genome: Mapping[str, Any], peer: str | None = None) -> Any:
        """As :meth:`Backend.load`; ``peer``: the name of the peer kernel whose family built ``built``, whose
        launch, arguments and output views then launch it on the campaign's inputs. Called as a run ends
        (evo/loop/peers.py), after the baseline's outputs are frozen."""
        ...


@runtime_checkable
class Gate(Protocol):
    """One step of an attempt's judgement (gates/registry.py ``gate_order()``: build, static, identical SASS, the
    exact rule, recorded knobs only, correctness, perf, recheck, sanitizer, bound, e2e; docs/gates.md).

    The loop calls each gate of ``Campaign.gates`` in order, once per attempt, while the attempt passes: a gate
    reads the step (``gates.judge.Evidence``: a read-only context, the proposal, the attempt being filled in and what
    earlier gates left there, such as the build and the loaded module), fills in the attempt's evidence, and
    returns None to pass it on, or the Verdict that ends its judgement (a rejection or an error; ``accepted``
    also passes on, to the gates that only look at accepted attempts). Decisions read ``Verdict.code``, never the
    reason. A gate raising a ``harness.HarnessError`` is recorded as that error, with ``name`` as the verdict's
    gate unless the error names its own.
    """

    @property
    def name(self) -> str:
        """What the gate is called (``Campaign.gates`` is searched by it, e.g. to replace one)."""
        ...

    def __call__(self, step: Any) -> Verdict | None:
        """Judge the attempt in ``step``: None passes it on; a Verdict is recorded as the attempt's."""
        ...


class AskedTrial(Protocol):
    """A trial a storage gave for one genome (``Storage.ask``): an Optuna trial (``Ledger``) or a
    ``MemoryTrial``. The loop reads its number, the attempt's id, and hands it back to ``Storage.record``."""

    @property
    def number(self) -> int: ...


class StorageView(Protocol):
    """What one step of the loop reads of its storage, from one read (``Storage.view``;
    ``evo.ledger.view.View``)."""

    @property
    def attempts(self) -> list[Attempt]:
        """Every recorded attempt, by id (as ``Storage.attempts()``)."""
        ...

    @property
    def seen(self) -> set[str]:
        """Genome keys judged or being judged: the proposer proposes none of them again."""
        ...

    @property
    def running(self) -> Sequence[AskedTrial]:
        """Trials asked and not yet recorded (as ``Storage.running()``)."""
        ...

    def champion(self) -> Attempt | None:
        """As ``Storage.champion()``, from these attempts."""
        ...


@runtime_checkable
class Storage(Protocol):
    """Where a campaign's attempts and meta live: ``evo.ledger.ledger.Ledger`` (an Optuna study; SQLite or
    PostgreSQL, shared by workers) or ``evo.ledger.memory_ledger.MemoryLedger`` (one process, nothing kept: the search
    benchmark), chosen by the storage URL in ``evo.ledger.storage.open_ledger``."""

    shared: bool  # several processes run this campaign: ask() refuses genomes and budget others hold
    limit: int | None  # shared: the attempt budget ask() enforces
    heartbeat_s: int  # how often the loop checks for dead workers' attempts (recover)
    grace_s: int
    # set by the loop while it runs: the campaign's elapsed seconds now, which a session heartbeat keeps current in
    # the meta between attempts (None outside a run; a storage with no heartbeat ignores it)
    elapsed_fn: Callable[[], float] | None

    def claim(self, mode: str = "run") -> None:
        """Register this process as running the campaign; once, before set-up (``run()``)."""
        ...

    def release(self) -> None:
        """Give the claim back; once, when ``run()`` ends however it ends."""
        ...

    @property
    def claimed(self) -> bool:
        """Whether this process holds the campaign's claim (``claim()`` ran, ``release()`` did not): read before a
        claim, so that a resume's checks run once."""
        ...

    def meta(self, key: str, default: Any = None) -> Any: ...

    def set_meta(self, key: str, value: Any) -> None: ...

    def all_meta(self) -> dict[str, Any]: ...

    def create_meta(self, items: Mapping[str, Any]) -> bool:
        """Write the campaign's meta unless it exists; in set-up (of several workers exactly one writes it)."""
        ...

    def append_meta(self, key: str, item: Any) -> None: ...

    def ask(self, fixed: Mapping[str, Any] | None = None) -> AskedTrial:
        """A new trial (with ``.number``) holding genome ``fixed``: when the loop reserves a proposal (at once on a
        shared storage, where it may raise ``evo.ledger.reserve.GenomeTaken`` or ``BudgetTaken``)."""
        ...

    def record(
        self, trial: Any, attempt: Attempt, meta: Mapping[str, Any] | None = None, *, meta_max: Any = None
    ) -> None:
        """Store the judged attempt and finish its trial (with ``meta`` and ``meta_max`` in the same write); once
        per attempt, whatever its verdict. ``trial`` is one this storage's ``ask`` gave (each takes its own kind
        only, so the parameter names no protocol a storage could not accept)."""
        ...

    def attempts(self) -> list[Attempt]: ...

    def champion(self) -> Attempt | None:
        """The newest accepted attempt, else the baseline."""
        ...

    def running(self) -> Sequence[AskedTrial]: ...

    def view(self) -> StorageView:
        """Attempts, seen genome keys and running trials from one read (``evo.ledger.view.View``); once per step."""
        ...

    def recover(self) -> list[int]:
        """Record attempts dead processes left running as interrupted; in set-up and every ``heartbeat_s``."""
        ...
