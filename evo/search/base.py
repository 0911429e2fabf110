"""The proposer interface: one module per search strategy, one entry point each, one options table each.

A strategy's ``OPTIONS`` table (name -> :class:`Option`) is the only place its options' defaults are stated: the
proposer reads them through ``opt``, config validation checks against the table, and docs/config.md is generated
from it (`evo config --markdown`).
"""

from __future__ import annotations

import abc
import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evo.core.family import Family, Geometry
from evo.core.genome import Genome
from evo.core.records import Attempt


@dataclass(frozen=True)
class Option:
    """One row of a strategy's options table. Its type is the default's (an int default: an integer option)."""

    default: Any
    doc: str
    lo: float | None = None
    hi: float | None = None

    @property
    def type_text(self) -> str:
        return _TYPE_TEXT.get(type(self.default), type(self.default).__name__)

    @property
    def allowed_text(self) -> str:
        return f"{self.lo}..{self.hi}" if self.lo is not None and self.hi is not None else ""

    @property
    def default_text(self) -> str:
        d = self.default
        return ("true" if d else "false") if isinstance(d, bool) else "{}" if d == {} else str(d)

    def check(self, name: str, value: Any) -> None:
        """Raise ValueError("<name>: <problem>") for a value this row does not take."""
        if isinstance(self.default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{name}: expected true or false, got {value!r}")
        elif isinstance(self.default, (int, float)) and self.lo is not None and self.hi is not None:
            check_range({name: value}, name, self.lo, self.hi, integer=isinstance(self.default, int))


_TYPE_TEXT = {bool: "true/false", int: "integer", float: "number", str: "string", dict: "mapping"}


@dataclass
class Proposal:
    genome: Genome
    origin: str
    derived_from: list[int] = field(default_factory=list)


class Proposer(abc.ABC):
    """Makes the next genome to try from the attempts recorded so far.

    ``propose`` is called once per attempt, after the previous attempt was
    recorded; it must return a valid genome (``family.check`` passes) that
    is not in ``seen``, or None when the space holds no such genome.
    ``OPTIONS`` is the strategy's options table: name -> :class:`Option`.
    """

    OPTIONS: ClassVar[dict[str, Option]] = {}

    def __init__(
        self,
        family: Family,
        geometries: Sequence[Geometry],
        options: Mapping[str, Any],
        seed: int,
        tabu: Mapping[str, Sequence[Any]] | None = None,
    ):
        self.family = family
        self.geometries = list(geometries)
        self.options = dict(options)
        self.rng = random.Random(seed)
        self.tabu = {k: set(v) for k, v in (tabu or {}).items()}  # knob -> values never to propose
        # The campaign's correctness mode (gates.correctness.mode: exact or tolerance), set by the campaign before the
        # first propose; None where the caller does not say (a strategy that cares may infer it from the verdicts).
        self.correctness_mode: str | None = None

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> None:
        """Raise ValueError("<option>: <problem>") for a bad option value (the table's checks; a strategy with
        checks the table cannot state extends this). Names outside the table are the config loader's to refuse."""
        for name, value in options.items():
            if name in cls.OPTIONS:
                cls.OPTIONS[name].check(name, value)

    def opt(self, name: str) -> Any:
        """Option ``name`` as given in the config, else its default from the table."""
        return self.options.get(name, self.OPTIONS[name].default)

    @abc.abstractmethod
    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None: ...

    # --- helpers shared by strategies --------------------------------------
    def valid(self, genome: Genome, seen: set[str]) -> bool:
        if genome.key in seen:
            return False
        if any(genome[k] in vals for k, vals in self.tabu.items()):
            return False
        from evo.core.hooks import check_genome

        return check_genome(self.family, genome, self.geometries) is None

    def space(self) -> Iterator[Genome]:
        names = [k.name for k in self.family.knobs]
        for vals in itertools.product(*(k.values for k in self.family.knobs)):
            yield Genome(dict(zip(names, vals)))

    def random_unseen(self, seen: set[str], tries: int = 200) -> Genome | None:
        for _ in range(tries):
            g = Genome({k.name: self.rng.choice(k.values) for k in self.family.knobs})
            if self.valid(g, seen):
                return g
        rest = [g for g in self.space() if self.valid(g, seen)]
        return self.rng.choice(rest) if rest else None


def check_range(options: Mapping[str, Any], name: str, lo: float, hi: float, integer: bool = False) -> None:
    if name not in options:
        return
    v = options[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise ValueError(f"{name}: expected {'an integer' if integer else 'a number'}, got {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{name}: {v!r} is out of range (allowed: {lo}..{hi})")
