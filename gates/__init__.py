"""Gates: small pure functions from evidence to a :class:`evo.core.records.Verdict`: a code (what was decided, what
the campaign and the proposers read, with the data they need in its detail) and a reason (the same in words, for
people).

Cheapest first: static (compiler report), correctness (hashes / float64
tolerance), perf (paired timings), the sanitizer's findings, and the share-derived decode bound.
"""

from gates.correctness import CorrectnessEvidence, OutputCheck, baseline_problem, correctness_gate
from gates.perf import EarlyStop, PairSamples, PerfResult, noise_floor, perf_gate, threshold
from gates.sanitizer import SanitizerResult, ToolReport, sanitizer_gate
from gates.static import identical_sass, identical_variant, static_gate

__all__ = [
    "CorrectnessEvidence",
    "OutputCheck",
    "baseline_problem",
    "correctness_gate",
    "EarlyStop",
    "PairSamples",
    "PerfResult",
    "noise_floor",
    "perf_gate",
    "threshold",
    "SanitizerResult",
    "ToolReport",
    "sanitizer_gate",
    "identical_sass",
    "identical_variant",
    "static_gate",
]
