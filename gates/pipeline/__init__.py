"""The built-in gates, one module each, registered in ``gates.registry`` when this package is imported.

The order (lower first): build 10, static 20, identical_sass 30, exact_rule 40, recorded_knobs_only 50,
correctness 60, perf 70, recheck 80, sanitizer 90, bound 100, e2e 110. Cheapest first; a gate that looks at
accepted attempts only goes after perf (70).
"""

from gates.pipeline import (  # noqa: F401  (imported for their registration)
    bound,
    build,
    correctness,
    e2e,
    exact_rule,
    identical_sass,
    perf,
    recheck,
    recorded_knobs_only,
    sanitizer,
    static,
)
