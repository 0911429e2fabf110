"""Records that flow from the gates into the ledger.

Everything here is a plain dataclass that round-trips through JSON, because the
ledger stores each attempt as one JSON document inside Optuna's storage.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

# Verdict statuses.
ACCEPTED = "accepted"
REJECTED = "rejected"
ERROR = "error"
BASELINE = "baseline"


@dataclass(frozen=True)
class Verdict:
    """What a gate (or the campaign) decided about one attempt, and why."""

    status: str  # accepted | rejected | error | baseline
    gate: str | None = None  # static | correctness | perf | bound | proposer | build
    reason: str = ""
    kind: str | None = None  # for errors: compile, crash, timeout, interrupted, not_recorded

    @classmethod
    def accepted(cls, reason: str) -> "Verdict":
        return cls(ACCEPTED, "perf", reason)

    @classmethod
    def rejected(cls, gate: str, reason: str) -> "Verdict":
        return cls(REJECTED, gate, reason)

    @classmethod
    def error(cls, kind: str, reason: str, gate: str | None = None) -> "Verdict":
        return cls(ERROR, gate, reason, kind)

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


PASS = Verdict("pass")


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
    resources: dict[str, Resources] = field(default_factory=dict)  # per specialization
    verdict: Verdict = field(default_factory=lambda: Verdict(ERROR, None, "not evaluated", "interrupted"))
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
    started_at: str = ""
    finished_at: str = ""
    compile_s: float = 0.0
    measure_s: float = 0.0
    cycle_s: float = 0.0  # the campaign loop's wall time for this attempt (propose, build, gates, record)

    # --- JSON round trip -------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Attempt":
        d = json.loads(text)
        d["verdict"] = Verdict(**d["verdict"])
        d["resources"] = {k: Resources(**v) for k, v in d.get("resources", {}).items()}
        d["timings"] = {k: Timing(**v) for k, v in d.get("timings", {}).items()}
        for key in ("speedup_vs_parent", "speedup_vs_baseline"):
            d[key] = {k: Interval(**v) for k, v in d.get(key, {}).items()}
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
