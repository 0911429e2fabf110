"""Peers for tools/search_bench.py that are not evo proposers: Optuna samplers told the order of numeric knobs.

evo's ``tpe`` / ``optuna`` proposers (evo/search/optuna_samplers.py) give every knob to Optuna as a categorical
parameter, so a sampler that can use value order (TPE's Parzen estimators over integers, GPSampler's kernel over
numbers) never learns that ``block 256`` lies between 128 and 512. :class:`OrderedOptuna` tells it: a knob whose
values are all numbers (not booleans) and that has three or more of them is an ``IntDistribution`` over the index of
its sorted values (0 .. n-1: equal steps per value, the way the knob lists are made: powers of two, small counts);
every other knob stays categorical. Everything else (duplicates told with the known score, invalid asks told as
FAIL, the random fallback after ``retries`` asks) is evo's Optuna proposer as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optuna.distributions import IntDistribution

from evo.core.family import Family, Geometry
from evo.core.genome import Genome
from evo.search.optuna_samplers import OptunaSampler


def ordered_values(values: Sequence[Any]) -> list[Any] | None:
    """The knob's values sorted, when they are 3 or more numbers (no booleans); else None (categorical)."""
    vals = list(values)
    if len(vals) >= 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return sorted(vals)
    return None


class OrderedOptuna(OptunaSampler):
    """An Optuna sampler over the knobs, numeric ones as ordered integers (their sorted value index): OptunaSampler
    with ``_params`` and ``_genome`` encoding and decoding them."""

    LABEL = " (ordered)"

    def __init__(
        self,
        family: Family,
        geometries: Sequence[Geometry],
        options: Mapping[str, Any],
        seed: int,
        tabu: Mapping[str, Sequence[Any]] | None = None,
    ):
        super().__init__(family, geometries, options, seed, tabu)
        self.order: dict[str, list[Any]] = {}
        for k in family.knobs:
            vals = ordered_values(k.values)
            if vals is not None:
                self.order[k.name] = vals
                self.distributions[k.name] = IntDistribution(0, len(vals) - 1)

    def told(self) -> dict[str, str]:
        """What the sampler is told of each knob: 'ordered (v0 < v1 < ...)' or 'categorical'."""
        return {
            n: (f"ordered ({' < '.join(map(str, self.order[n]))})" if n in self.order else "categorical")
            for n in self.distributions
        }

    def _params(self, genome: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            raw = {n: genome[n] for n in self.distributions}
        except KeyError:
            return None
        out: dict[str, Any] = {}
        for n, v in raw.items():
            if n in self.order:
                if v not in self.order[n]:
                    return None
                out[n] = self.order[n].index(v)
            elif v in self.distributions[n].choices:  # type: ignore[attr-defined]
                out[n] = v
            else:
                return None
        return out

    def _genome(self, params: Mapping[str, Any]) -> Genome:
        return Genome({n: (self.order[n][int(v)] if n in self.order else v) for n, v in params.items()})


# the bench's names for these peers (tools/search_bench.py resolves a strategy's name here before evo.search)
BENCH_PROPOSERS: dict[str, type[OptunaSampler]] = {"optuna-ordered": OrderedOptuna}
