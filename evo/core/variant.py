"""What makes two genomes the same variant: their machine code and, at every geometry, their launch.

Engines choose the block size (and the grid, the dynamic shared memory, launch attributes) at launch: FlashInfer
sets ``blockDim.y = num_warps``, vLLM ``blockDim.x``. A knob that changes only ``Family.launch`` compiles to the
very same machine code, and a variant judged by its SASS alone would be rejected unmeasured as a twin of the
baseline. So a variant is the pair (SASS digest, launch digest), and this module is the one place that decides
"same variant": the campaign's identity gate (evo/loop/campaign.py), ``evo check``'s count of distinct variants
(evo/check.py) and the sweeps' ``same_as`` links (tools/sweep.py, tools/merge_sweeps.py) all ask it.

The launch digest is a sha256 over each geometry's name, grid, block, dynamic shared bytes and launch attributes
(PDL where the campaign launches with PDL and the family calls the genome PDL-safe): what the driver is given, so
two genomes with equal digests are launched alike everywhere the campaign measures them.

Records made before launches were hashed carry an empty launch digest (``Attempt.launch_sha256 == ""``, a sweep
entry without ``launch``). Such a record stands for "this machine code, whatever its launch": it matches any
variant with its SASS, as it did then. Resuming an old campaign therefore measures nothing again that it would
not have measured before; only records made since, with both digests, tell launches apart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo.core.errors import FamilyError
from evo.core.family import Family, Geometry, Launch
from evo.core.genome import Genome
from evo.core.hooks import calling


class LaunchError(Exception):
    """The family's ``launch()`` raised or gave something that is not a Launch (one line, naming genome and
    geometry); the campaign records it as the attempt's error verdict, ``evo check`` fails on it."""


_CORE = ("grid", "block", "shared_bytes")


def _whole(v: Any) -> Any:
    """A JSON-stable form of a launch value: numpy integers and tuples as plain ints and lists."""
    if isinstance(v, (tuple, list)):
        return [_whole(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return v.item()  # a numpy scalar
    return v


def launch_record(geometry: Geometry, lc: Launch, pdl: bool) -> dict[str, Any]:
    """One geometry's launch as the digest sees it. Launch fields beyond grid, block and shared_bytes (attributes
    a later Launch may carry) count only where they differ from their default, so that adding one with a default
    does not change the digest of every launch recorded before."""
    rec: dict[str, Any] = {"geometry": geometry.name, **{k: _whole(getattr(lc, k)) for k in _CORE}, "pdl": bool(pdl)}
    for f in dataclasses.fields(lc):
        if f.name in _CORE:
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        value = getattr(lc, f.name)
        if value != default:
            rec[f.name] = _whole(value)
    return rec


def _launch_of(family: Family, genome: Mapping[str, Any], g: Geometry) -> Launch:
    """``family.launch(genome, g)``, whatever it raised or returned turned into one LaunchError line."""
    where = f"launch({Genome(genome).key}) at {g.name}"
    try:
        with calling(family.name, "launch()"):
            lc = family.launch(genome, g)
    except FamilyError:  # sys.exit / os._exit in it: the command stops on one line (evo/core/hooks.py)
        raise
    except Exception as e:  # noqa: BLE001 - the family's code: one line, whatever it raised
        raise LaunchError(f"{where} raised {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    if not isinstance(lc, Launch):
        raise LaunchError(f"{where} gives a {type(lc).__name__}, not a Launch(grid, block, shared_bytes)")
    return lc


def launch_digest(family: Family, genome: Mapping[str, Any], geometries: Sequence[Geometry], pdl: bool = False) -> str:
    """The sha256 of the genome's launches at every geometry (sorted by name). ``pdl``: the campaign launches with
    PDL (gates.perf.launch: pdl), which applies where ``family.pdl_safe(genome)``. Called after the build of each
    attempt and by ``evo check`` for each compiled genome; raises LaunchError."""
    try:
        with calling(family.name, "pdl_safe()"):
            pdl_on = bool(pdl) and bool(family.pdl_safe(genome))
    except FamilyError:
        raise
    except Exception as e:  # noqa: BLE001 - the family's code
        raise LaunchError(f"pdl_safe({Genome(genome).key}) raised {type(e).__name__}: {e}") from None
    recs = [launch_record(g, _launch_of(family, genome, g), pdl_on) for g in sorted(geometries, key=lambda x: x.name)]
    return hashlib.sha256(json.dumps(recs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Variant:
    """A compiled genome's identity: its SASS digest and its launch digest ("" where the record predates launch
    digests: the SASS alone decides, see the module's docstring)."""

    sass_sha256: str
    launch_sha256: str = ""

    @classmethod
    def of(cls, record: Any) -> Variant:
        """The variant of an Attempt (or anything with ``sass_sha256`` and, maybe, ``launch_sha256``)."""
        return cls(getattr(record, "sass_sha256", "") or "", getattr(record, "launch_sha256", "") or "")

    def same(self, other: Variant) -> bool:
        """The one rule: same machine code, and the same launch wherever both records know their launch. Without
        a SASS digest (nothing was compiled) nothing is the same."""
        if not self.sass_sha256 or self.sass_sha256 != other.sass_sha256:
            return False
        return not self.launch_sha256 or not other.launch_sha256 or self.launch_sha256 == other.launch_sha256

    @property
    def key(self) -> str:
        """A string for dicts and files (``variant_key``)."""
        return variant_key(self.sass_sha256, self.launch_sha256)


def variant_key(sass_sha256: str, launch_sha256: str = "") -> str:
    """``sass`` alone where no launch digest is known (as records before launch digests were keyed), else
    ``sass+launch``. Two keys are equal exactly when two complete variants are the same; a record without a
    launch digest matches by SASS only through ``Variant.same``, never through its key."""
    return f"{sass_sha256}+{launch_sha256}" if launch_sha256 else sass_sha256


def twin(variant: Variant, measured: Iterable[tuple[Variant, int]]) -> int | None:
    """The id of the last measured record that is the same variant as ``variant`` (the identity gate's "identical
    to attempt #N"), or None. ``measured``: (variant, id) in the ledger's order."""
    found = None
    for v, ident in measured:
        if variant.same(v):
            found = ident
    return found


def inert_knobs(
    family: Family,
    launch_of: Callable[[Genome], str],
    sass_of: Callable[[Genome], str],
    valid: Callable[[Genome], bool],
) -> list[str]:
    """The knobs for which each valid change of that knob alone from the baseline gives the baseline's variant:
    the same launch digest at every geometry (``launch_of``, cheap: no compile) and then the same machine code
    (``sass_of``, a compile, asked only where the launches agree). A knob none of whose values is valid alone is
    left out (nothing tells). Called by ``evo check`` on its compiled genomes (it caches both callables)."""
    base = family.baseline()
    out = []
    for k in family.knobs:
        tried = False
        for value in k.values:
            g = base.replace(**{k.name: value})
            if g == base or not valid(g):
                continue
            tried = True
            if launch_of(g) != launch_of(base) or sass_of(g) != sass_of(base):
                break
        else:
            if tried:
                out.append(k.name)
    return out
