"""Evolutionary search: elite parents, one- or two-knob mutations, crossover.

| option | default | what it does |
|---|---|---|
| elite | 4 | how many of the best measured genomes may be parents |
| champion_bias | 0.5 | chance that the parent is the current champion |
| two_knob | 0.3 | chance that a mutation changes two knobs instead of one |
| crossover | 0.25 | chance of a uniform crossover of two elites (then maybe one mutation) |
| neighbor | 0.7 | chance that a mutated ordered knob moves to an adjacent value |

Parents are ranked by their measured score (weighted geometric-mean speedup
over the baseline), so a near-miss that was not accepted can still seed the
next step. Genomes already tried, invalid ones, and knob values the campaign
has ruled out (tabu) are never proposed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.genome import Genome
from evo.proposers.base import Proposal, Proposer, check_range
from evo.records import ACCEPTED, BASELINE, Attempt


class Evolutionary(Proposer):
    OPTIONS = {
        "elite": "how many of the best measured genomes may be parents (1..64)",
        "champion_bias": "chance the parent is the current champion (0..1)",
        "two_knob": "chance a mutation changes two knobs (0..1)",
        "crossover": "chance of crossing two elites (0..1)",
        "neighbor": "chance an ordered knob moves to an adjacent value (0..1)",
    }

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> None:
        check_range(options, "elite", 1, 64, integer=True)
        for name in ("champion_bias", "two_knob", "crossover", "neighbor"):
            check_range(options, name, 0.0, 1.0)

    def _opt(self, name: str, default: float) -> float:
        return self.options.get(name, default)

    def mutate(self, parent: Genome, n_knobs: int) -> tuple[Genome, str]:
        knobs = [k for k in self.family.knobs if len(k.values) > 1]
        chosen = self.rng.sample(knobs, min(n_knobs, len(knobs)))
        changes: dict[str, Any] = {}
        for k in chosen:
            vals = list(k.values)
            i = vals.index(parent[k.name])
            if self.rng.random() < self._opt("neighbor", 0.7):
                j = i + self.rng.choice([-1, 1]) if 0 < i < len(vals) - 1 else (1 if i == 0 else len(vals) - 2)
            else:
                j = self.rng.choice([x for x in range(len(vals)) if x != i])
            changes[k.name] = vals[j]
        child = parent.replace(**changes)
        return child, child.describe_change(parent)

    def crossover(self, a: Genome, b: Genome) -> Genome:
        return Genome({k: (a[k] if self.rng.random() < 0.5 else b[k]) for k in a})

    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        measured = [a for a in attempts if a.score is not None]
        champ = next((a for a in reversed(attempts) if a.verdict.status == ACCEPTED), None) or next(
            (a for a in attempts if a.verdict.status == BASELINE), None
        )
        if not measured or champ is None:
            g = self.random_unseen(seen)
            return Proposal(g, "random (nothing measured yet)") if g is not None else None
        elite = sorted(measured, key=lambda a: a.score or 0.0, reverse=True)[: int(self._opt("elite", 4))]
        if champ not in elite:
            elite = [champ] + elite[:-1]
        for _ in range(300):
            if len(elite) >= 2 and self.rng.random() < self._opt("crossover", 0.25):
                pa, pb = self.rng.sample(elite, 2)
                child = self.crossover(Genome(pa.genome), Genome(pb.genome))
                origin = f"crossover of #{pa.id} x #{pb.id}"
                derived = [pa.id, pb.id]
                if child.key in (pa.genome_key, pb.genome_key) or self.rng.random() < 0.5:
                    child, change = self.mutate(child, 1)
                    origin += f", then {change}"
            else:
                p = champ if self.rng.random() < self._opt("champion_bias", 0.5) else self.rng.choice(elite)
                n = 2 if self.rng.random() < self._opt("two_knob", 0.3) else 1
                child, change = self.mutate(Genome(p.genome), n)
                origin, derived = f"mutation of #{p.id}: {change}", [p.id]
            if self.valid(child, seen):
                return Proposal(child, origin, derived)
        # Local moves are used up: any unseen single-knob neighbour of an elite, then anything unseen.
        for p in elite:
            pg = Genome(p.genome)
            for k in self.family.knobs:
                for v in k.values:
                    child = pg.replace(**{k.name: v})
                    if self.valid(child, seen):
                        return Proposal(child, f"mutation of #{p.id}: {child.describe_change(pg)} (exhaustive)", [p.id])
        g = self.random_unseen(seen)
        return Proposal(g, "random (neighbourhoods exhausted)") if g is not None else None
