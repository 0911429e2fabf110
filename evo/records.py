"""The public API for families: the measurement records (Attempt, Verdict, Code, Timing, Interval, Resources, ...).

Families (candidates/, examples/, the ``evo new`` templates, users' own repositories) import from here, e.g.
``from evo.records import ...``; this path stays stable. The module itself is evo/core/records.py (evo's core types,
which import nothing above them); evo's own code imports it from there.
"""

from evo.core.records import (
    ACCEPTED,
    BASELINE,
    ERROR,
    ERROR_KINDS,
    PASS,
    REJECTED,
    SIMULATED_LABEL,
    Attempt,
    Code,
    Interval,
    Resources,
    Timing,
    Verdict,
    error_code,
    legacy_code,
    simulated_label,
    verdict_from_dict,
)

__all__ = [
    "ACCEPTED",
    "Attempt",
    "BASELINE",
    "Code",
    "ERROR",
    "ERROR_KINDS",
    "Interval",
    "PASS",
    "REJECTED",
    "Resources",
    "SIMULATED_LABEL",
    "Timing",
    "Verdict",
    "error_code",
    "legacy_code",
    "simulated_label",
    "verdict_from_dict",
]
