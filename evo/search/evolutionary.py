"""Evolutionary search: elite parents, one- or two-knob mutations, crossover.

Options: ``Evolutionary.OPTIONS`` (listed in docs/config.md).

Parents are ranked by their measured score (weighted geometric-mean speedup
over the baseline), so a near-miss that was not accepted can still seed the
next step. Genomes already tried, invalid ones, and knob values the campaign
has ruled out (tabu) are never proposed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evo.core.genome import Genome
from evo.core.records import ACCEPTED, BASELINE, Attempt
from evo.search.base import Option, Proposal, Proposer


class Evolutionary(Proposer):
    OPTIONS = {
        "elite": Option(4, "how many of the best measured genomes may be parents", 1, 64),
        "champion_bias": Option(0.5, "chance that the parent is the current champion", 0.0, 1.0),
        "two_knob": Option(0.3, "chance that a mutation changes two knobs instead of one", 0.0, 1.0),
        "crossover": Option(0.25, "chance of a uniform crossover of two elites (then maybe one mutation)", 0.0, 1.0),
        "neighbor": Option(0.7, "chance that a mutated ordered knob moves to an adjacent value", 0.0, 1.0),
    }

    def mutate(self, parent: Genome, n_knobs: int) -> tuple[Genome, str]:
        knobs = [k for k in self.family.knobs if len(k.values) > 1]
        chosen = self.rng.sample(knobs, min(n_knobs, len(knobs)))
        changes: dict[str, Any] = {}
        for k in chosen:
            vals = list(k.values)
            i = vals.index(parent[k.name])
            if self.rng.random() < self.opt("neighbor"):
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
        elite = sorted(measured, key=lambda a: a.score or 0.0, reverse=True)[: int(self.opt("elite"))]
        if champ not in elite:
            elite = [champ] + elite[:-1]
        for _ in range(300):
            if len(elite) >= 2 and self.rng.random() < self.opt("crossover"):
                pa, pb = self.rng.sample(elite, 2)
                child = self.crossover(Genome(pa.genome), Genome(pb.genome))
                origin = f"crossover of #{pa.id} x #{pb.id}"
                derived = [pa.id, pb.id]
                if child.key in (pa.genome_key, pb.genome_key) or self.rng.random() < 0.5:
                    child, change = self.mutate(child, 1)
                    origin += f", then {change}"
            else:
                p = champ if self.rng.random() < self.opt("champion_bias") else self.rng.choice(elite)
                n = 2 if self.rng.random() < self.opt("two_knob") else 1
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
