"""Static gate: the compiler's resource report, before any GPU time is spent."""

from __future__ import annotations

from collections.abc import Mapping

from evo.core.records import PASS, Code, Resources, Verdict


def static_gate(
    resources: Mapping[str, Resources],
    baseline: Mapping[str, Resources],
    max_registers: int = 255,
    allow_new_spills: bool = False,
) -> Verdict:
    """Reject register blow-ups, and spills or stack frames the baseline does not have.

    ``resources`` and ``baseline`` map a specialization (e.g. "S=1,prenorm=0")
    to the ptxas report of that module.
    """
    for spec, r in sorted(resources.items()):
        b = baseline.get(spec, Resources())
        where = f" ({spec})" if len(resources) > 1 else ""
        if r.registers > max_registers:
            return Verdict.rejected(
                "static", f"{r.registers} registers > limit {max_registers}{where}", Code.STATIC_REGISTERS
            )
        if r.spills > b.spills and not allow_new_spills:
            return Verdict.rejected(
                "static",
                f"spills {r.spill_stores} B stored / {r.spill_loads} B loaded; baseline spills "
                f"{b.spill_stores}/{b.spill_loads} B{where}",
                Code.STATIC_SPILLS,
            )
        if r.stack_frame > b.stack_frame:
            return Verdict.rejected(
                "static", f"{r.stack_frame}-byte stack frame; baseline has {b.stack_frame}{where}", Code.STATIC_STACK
            )
    return PASS


def identical_variant(other: int | None) -> Verdict:
    """Skip GPU work for a variant already measured under another genome: ``other`` is that attempt's id (found by
    evo/core/variant.py, the one rule of "same variant": machine code and launch), or None."""
    if other is None:
        return PASS
    return Verdict.rejected(
        "static",
        f"identical machine code and launch to attempt #{other}: the same variant, not measured again",
        Code.STATIC_IDENTICAL_SASS,  # (the code's name predates launches; decisions read it)
        {"attempt": other},
    )


def identical_sass(sass_sha256: str, measured: Mapping[str, int]) -> Verdict:
    """Skip GPU work for machine code that was already measured under another genome (by SASS alone: for callers
    with no launch to compare; the campaign asks ``identical_variant``)."""
    other = measured.get(sass_sha256)
    if other is not None:
        return Verdict.rejected(
            "static",
            f"identical SASS to attempt #{other}: same machine code, not measured again",
            Code.STATIC_IDENTICAL_SASS,
            {"attempt": other},
        )
    return PASS
