"""Gate "identical_sass": the same variant as an attempt already measured is not measured again."""

from __future__ import annotations

from evo.core.records import Verdict
from evo.core.variant import Variant, twin
from gates.judge import Evidence
from gates.registry import register_gate
from gates.static import identical_variant


@register_gate("identical_sass", order=30)
def identical_sass(s: Evidence) -> Verdict | None:
    """The same variant (machine code and launch, evo/core/variant.py) as an attempt with timings: not measured
    again. An attempt recorded before launch digests matches by its machine code alone, as it did then."""
    a = s.attempt
    if s.remeasure:
        return None
    measured = ((Variant.of(x), x.id) for x in s.recorded if x.timings and x.sass_sha256 and x.id != a.id)
    v = identical_variant(twin(Variant.of(a), measured))
    return None if v.ok else v
