"""Random search: uniform over the valid, untried genomes (the baseline every search must beat)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from evo.core.records import Attempt
from evo.search.base import Option, Proposal, Proposer


class RandomSearch(Proposer):
    OPTIONS: ClassVar[dict[str, Option]] = {}

    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        g = self.random_unseen(seen)
        return Proposal(g, "random") if g is not None else None
