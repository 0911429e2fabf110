"""Records that flow from the gates into the ledger.

Everything here is a plain dataclass that round-trips through JSON, because the
ledger stores each attempt as one JSON document inside Optuna's storage.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Verdict statuses.
ACCEPTED = "accepted"
REJECTED = "rejected"
ERROR = "error"
BASELINE = "baseline"

# What every timing, message and report of a recorded (simulated) backend says of where its numbers come from.
SIMULATED_LABEL = "simulated from recorded H200 measurements"


def simulated_label(source: Any = None) -> str:
    """What a simulated run's lines say of where its numbers come from: the backend's own ``label`` (a Kernel Tuner
    cache's names the device it was recorded on, harness/ktcache.py), or a ledger's device facts' ``note`` (what
    the backend's facts said when the campaign ran), else :data:`SIMULATED_LABEL`."""
    note = source.get("note") if isinstance(source, Mapping) else getattr(source, "label", None)
    return note if isinstance(note, str) and note else SIMULATED_LABEL


class Code(StrEnum):
    """What a verdict decided, as a value to compare: every decision reads this (and ``Verdict.detail``), never
    the reason, which is for people and may be reworded freely.

    The part before the dot is the gate that decides it (``error.*``: the attempt could not be judged; its
    ``Verdict.kind`` is the part after the dot). The data a decision needs travels in ``Verdict.detail``; the
    keys each code carries are named beside it.
    """

    BASELINE = "baseline"  # the campaign's attempt #0, the reference
    PASS = "pass"  # a gate's "go on to the next gate" (gates.*: PASS); never recorded
    # static gate (gates/static.py)
    STATIC_REGISTERS = "static.registers"  # more registers than gates.static.max_registers
    STATIC_SPILLS = "static.spills"  # spills the baseline does not have
    STATIC_STACK = "static.stack"  # a larger stack frame than the baseline's
    # the same variant (machine code and launch, evo/core/variant.py) already measured; detail: attempt
    STATIC_IDENTICAL_SASS = "static.identical_sass"
    # correctness gate (gates/correctness.py; the campaign's recheck)
    CORRECTNESS_INEXACT_KNOB = "correctness.inexact_knob"  # exact mode, an order-changing knob; detail: knobs, geometry
    CORRECTNESS_OOB = "correctness.oob"  # wrote into the guard band around an output
    CORRECTNESS_NONFINITE = "correctness.nonfinite"  # NaN/Inf the baseline does not have
    CORRECTNESS_UNWRITTEN = "correctness.unwritten"  # output elements still holding the poison (in-out: the input)
    CORRECTNESS_INPUT_WRITTEN = "correctness.input_written"  # a launch changed an input; detail: input, geometry
    CORRECTNESS_RACE = "correctness.race"  # the output hash moved between runs on the same input
    CORRECTNESS_HASH = "correctness.hash"  # exact mode: output bits differ from the baseline's
    CORRECTNESS_NO_FLOAT64 = "correctness.no_float64"  # tolerance mode: bits differ, no float64 error known
    CORRECTNESS_TOLERANCE = "correctness.tolerance"  # tolerance mode: error vs float64 over the factor
    CORRECTNESS_RECHECK = "correctness.recheck"  # the backend's check after timing failed (gates/pipeline/recheck.py)
    # perf gate (gates/perf.py; the campaign's early stop)
    PERF_NO_SAMPLES = "perf.no_samples"
    PERF_TOO_FEW_PAIRS = "perf.too_few_pairs"  # under 3 unthrottled pairs at a geometry; detail: geometry
    PERF_PHYSICS = "perf.physics"  # faster than the copy ceiling allows; detail: geometry
    PERF_SLOWER = "perf.slower"  # slower than the champion beyond the noise band; detail: geometry
    PERF_WATCHED = "perf.watched"  # a watched geometry slower than the champion beyond its slack; detail: geometry
    PERF_WATCHED_BASELINE = "perf.watched_baseline"  # a watched geometry slower than the baseline; detail: geometry
    PERF_NOT_FASTER = "perf.not_faster"  # the lower bound misses the threshold; detail: rule (+ geometry for every)
    PERF_EARLY_STOP = "perf.early_stop"  # slower in each of the first pairs; detail: geometry, after
    PERF_ACCEPTED = "perf.accepted"  # a win: the new champion
    # end-to-end gate (evo/measure/e2e.py through evo/loop/checks.py)
    E2E_TOKENS = "e2e.tokens"  # the decode command's token stream changed
    # sanitizer gate (gates/sanitizer.py; compute-sanitizer run by evo/measure/sanitize.py)
    SANITIZER_FINDING = "sanitizer.finding"  # a finding no family suppression declares known; detail: tool, findings
    # could not be judged (Verdict.kind is the part after the dot)
    ERROR_COMPILE = "error.compile"  # NVRTC/ptxas failed
    ERROR_LAUNCH = "error.launch"  # the family's launch() raised or gave no Launch (evo/core/variant.py)
    ERROR_CRASH = "error.crash"  # the kernel or the worker process crashed
    ERROR_TIMEOUT = "error.timeout"  # the worker did not answer in worker.timeout_s
    ERROR_INTERRUPTED = "error.interrupted"  # the campaign stopped while it ran; it may be proposed again
    ERROR_NOT_RECORDED = "error.not_recorded"  # the recorded backend has no measurement for it (needs a GPU)
    ERROR_HARNESS = "error.harness"  # a bug in evo itself (the exception is re-raised after recording)
    ERROR_IDEA = "error.idea"  # an idea patch does not apply (alone or with another)
    ERROR_PROPOSER = "error.proposer"  # the outside proposer gave no usable answer
    ERROR_ARGUMENTS = "error.arguments"  # arg_types/kernel_args do not fit the cubin's parameter layout
    # only from reading an old record whose reason no rule of legacy_code recognises (and test fixtures)
    UNSPECIFIED = "unspecified"

    @property
    def gate(self) -> str | None:
        """The gate part (``static``, ``correctness``, ``perf``, ``e2e``, ``sanitizer``, ``error``), None for a code
        without one."""
        return self.value.split(".", 1)[0] if "." in self.value else None


ERROR_KINDS = {c.value.split(".", 1)[1]: c for c in Code if c.gate == "error"}


def error_code(kind: str | None) -> Code:
    """The code of an ``error`` verdict of this kind (``compile`` -> ``error.compile``)."""
    return ERROR_KINDS.get(kind or "", Code.UNSPECIFIED)


def _structural_code(status: str, kind: str | None) -> Code:
    """A code for a verdict built without one, from its status and kind alone (never from its reason)."""
    if status == BASELINE:
        return Code.BASELINE
    if status == "pass":
        return Code.PASS
    if status == ACCEPTED:
        return Code.PERF_ACCEPTED
    if status == ERROR:
        return error_code(kind)
    return Code.UNSPECIFIED


@dataclass(frozen=True)
class Verdict:
    """What a gate (or the campaign) decided about one attempt, and why.

    ``code`` is what was decided (decisions compare it); ``detail`` the data a decision needs (e.g. the knobs an
    exact-mode rejection names); ``reason`` says it in words, for people only.
    """

    status: str  # accepted | rejected | error | baseline
    gate: str | None = None  # static | correctness | perf | e2e | sanitizer | idea | proposer
    reason: str = ""
    # for errors: compile, launch, crash, timeout, interrupted, not_recorded, harness, idea, proposer
    kind: str | None = None
    code: Code = Code.UNSPECIFIED  # not given: derived from status and kind (a rejection stays UNSPECIFIED)
    detail: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        code = Code(self.code)  # (a str from JSON)
        if code is Code.UNSPECIFIED:
            code = _structural_code(self.status, self.kind)
        if self.status in (ACCEPTED, REJECTED) and code.gate not in (None, self.gate):
            raise ValueError(f"verdict code {code.value} does not belong to gate {self.gate}")
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "detail", dict(self.detail or {}))

    @classmethod
    def accepted(cls, reason: str, detail: Mapping[str, Any] | None = None) -> Verdict:
        return cls(ACCEPTED, "perf", reason, None, Code.PERF_ACCEPTED, dict(detail or {}))

    @classmethod
    def rejected(
        cls, gate: str, reason: str, code: Code = Code.UNSPECIFIED, detail: Mapping[str, Any] | None = None
    ) -> Verdict:
        return cls(REJECTED, gate, reason, None, code, dict(detail or {}))

    @classmethod
    def error(cls, kind: str, reason: str, gate: str | None = None, detail: Mapping[str, Any] | None = None) -> Verdict:
        return cls(ERROR, gate, reason, kind, error_code(kind), dict(detail or {}))

    @property
    def ok(self) -> bool:
        """True when the attempt may go on to the next gate."""
        return self.status in (ACCEPTED, BASELINE) or (self.status == "pass")

    def label(self) -> str:
        if self.status == ERROR:
            return f"error: {self.kind}"
        if self.status == REJECTED:
            return f"rejected: {self.gate}"
        return self.status


PASS = Verdict("pass", code=Code.PASS)

_KNOBS_RE = re.compile(r"^(?P<knobs>.*?) changes the summation order at (?P<geometry>\S+?);")
_LEGACY: dict[str | None, list[tuple[re.Pattern[str], Code]]] = {
    "static": [
        (re.compile(r"registers > limit"), Code.STATIC_REGISTERS),
        (re.compile(r"^spills "), Code.STATIC_SPILLS),
        (re.compile(r"stack frame"), Code.STATIC_STACK),
        (
            re.compile(r"^identical (SASS|machine code and launch) to attempt #(?P<attempt>\d+)"),
            Code.STATIC_IDENTICAL_SASS,
        ),
    ],
    "correctness": [
        (_KNOBS_RE, Code.CORRECTNESS_INEXACT_KNOB),
        (re.compile(r"^after timing: "), Code.CORRECTNESS_RECHECK),
        (re.compile(r"^wrote past the bounds"), Code.CORRECTNESS_OOB),
        (re.compile(r"NaN/Inf values"), Code.CORRECTNESS_NONFINITE),
        (re.compile(r"never written"), Code.CORRECTNESS_UNWRITTEN),
        (re.compile(r"^race: "), Code.CORRECTNESS_RACE),
        (re.compile(r"differs and no float64 error"), Code.CORRECTNESS_NO_FLOAT64),
        (re.compile(r"^hash of .* differs"), Code.CORRECTNESS_HASH),
        (re.compile(r"^error vs float64"), Code.CORRECTNESS_TOLERANCE),
    ],
    "perf": [
        (re.compile(r"^physics: .* at (?P<geometry>\S+) implies"), Code.PERF_PHYSICS),
        (
            re.compile(r"^slower than the champion at (?P<geometry>\S+) in all of the first (?P<after>\d+) pairs"),
            Code.PERF_EARLY_STOP,
        ),
        (re.compile(r"^slower than the baseline at (?P<geometry>[^:\s]+)"), Code.PERF_WATCHED_BASELINE),
        (re.compile(r"^slower at (?P<geometry>[^:\s]+):.*watched slack"), Code.PERF_WATCHED),
        (re.compile(r"^slower at (?P<geometry>[^:\s]+):"), Code.PERF_SLOWER),
        (re.compile(r"^not faster at (?P<geometry>[^:\s]+):"), Code.PERF_NOT_FASTER),
        (re.compile(r"^weighted speedup "), Code.PERF_NOT_FASTER),
        (re.compile(r"^no samples"), Code.PERF_NO_SAMPLES),
        (re.compile(r"unthrottled pairs at (?P<geometry>\S+)"), Code.PERF_TOO_FEW_PAIRS),
    ],
    "e2e": [(re.compile(r""), Code.E2E_TOKENS)],
}


def legacy_code(status: str, gate: str | None, kind: str | None, reason: str) -> tuple[Code, dict[str, Any]]:
    """(code, detail) of a verdict recorded before verdicts carried a code: the one place that reads reason text.

    It runs once per old record, as ``Attempt.from_json`` reads it (nothing recorded since needs it), and matches
    the reasons the gates wrote until then (those in the committed ledgers under ``logs/``) by gate: status and
    kind decide baseline, accepted and error verdicts; a rejection's reason decides its code, and the detail a
    decision needs is read back out of it (the knobs of an exact-mode rejection, the geometry of an early stop).
    A reason no rule knows gives ``Code.UNSPECIFIED``, which no decision matches.
    """
    if status != REJECTED:
        return _structural_code(status, kind), {}
    for pattern, code in _LEGACY.get(gate, []):
        m = pattern.search(reason or "")
        if m is None:
            continue
        detail: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
        if code is Code.CORRECTNESS_INEXACT_KNOB:
            detail["knobs"] = detail["knobs"].split(", ")
        for k in ("attempt", "after"):
            if k in detail:
                detail[k] = int(detail[k])
        return code, detail
    return Code.UNSPECIFIED, {}


def verdict_from_dict(d: Mapping[str, Any]) -> Verdict:
    """A recorded verdict; one without a code (recorded before codes) gets it from ``legacy_code``."""
    d = dict(d)
    if d.get("code") is None:
        d["code"], d["detail"] = legacy_code(d.get("status", ""), d.get("gate"), d.get("kind"), d.get("reason", ""))
    names = {f.name for f in dataclasses.fields(Verdict)}
    return Verdict(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval (e.g. a speedup)."""

    value: float
    lo: float
    hi: float
    confidence: float = 0.95
    n: int = 0

    def fmt(self, digits: int = 3) -> str:
        return f"{self.value:.{digits}f}x [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"


@dataclass
class Resources:
    """One kernel's resource report from ptxas."""

    registers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_static: int = 0
    barriers: int = 0
    report: str = "ptxas"  # "ptxas" (the -v report) or "cubin" (read from the ELF; spill bytes unknown)

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass
class Timing:
    """Per-geometry timing evidence for one attempt (nvbench-style labels live in `method`)."""

    median_us: float
    spread_pct: float  # (p90 - p10) / median of the candidate's own batch times
    samples: int
    discarded: int = 0  # samples thrown out because the GPU reported throttling
    method: str = ""


@dataclass
class Attempt:
    """One ledger row: everything known about one proposed variant."""

    id: int
    campaign: str
    family: str
    genome: dict[str, Any]
    genome_key: str
    origin: str = ""  # how the proposer made it ("mutation of #3: block 256->512")
    derived_from: list[int] = field(default_factory=list)
    parent_id: int | None = None  # the champion it was measured against
    backend: str = "gpu"  # gpu | recorded
    source_sha256: str = ""
    cubin_sha256: str = ""
    sass_sha256: str = ""
    # The launch at every geometry (evo/core/variant.py launch_digest): with sass_sha256, the variant's identity.
    # "" in records made before launch digests (they load as such): those match by SASS alone, as they did then.
    launch_sha256: str = ""
    resources: dict[str, Resources] = field(default_factory=dict)  # per specialization
    verdict: Verdict = field(default_factory=lambda: Verdict.error("interrupted", "not evaluated"))
    output_hashes: dict[str, dict[str, str]] = field(default_factory=dict)  # geometry -> "seed/output" -> sha256
    error_vs_ref: dict[str, dict[str, float]] = field(default_factory=dict)  # geometry -> metric -> value
    timings: dict[str, Timing] = field(default_factory=dict)
    speedup_vs_parent: dict[str, Interval] = field(default_factory=dict)
    speedup_vs_baseline: dict[str, Interval] = field(default_factory=dict)
    roofline_pct: dict[str, float] = field(default_factory=dict)  # % of measured copy ceiling
    score: float | None = None  # weighted geometric-mean speedup vs baseline (what the proposer learns)
    bound: dict[str, Any] | None = None  # slot for the share-derived decode-bound verdict
    device: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # set where the finish measured it (evo/loop/finish.py, FinishTag's fields): which finish, why it ran, what the
    # attempt is (a near-champion measured again, or a pair of single-knob gains) and the attempts it comes from
    finish: dict[str, Any] | None = None
    started_at: str = ""
    finished_at: str = ""
    compile_s: float = 0.0
    measure_s: float = 0.0
    cycle_s: float = 0.0  # the campaign loop's wall time for this attempt (propose, build, gates, record)

    # --- JSON round trip -------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Attempt:
        d = json.loads(text)
        d["verdict"] = verdict_from_dict(d["verdict"])
        d["resources"] = {k: Resources(**v) for k, v in d.get("resources", {}).items()}
        d["timings"] = {k: Timing(**v) for k, v in d.get("timings", {}).items()}
        for key in ("speedup_vs_parent", "speedup_vs_baseline"):
            d[key] = {k: Interval(**v) for k, v in d.get(key, {}).items()}
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
