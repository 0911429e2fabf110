"""Search strategies, one module each (``PROPOSERS`` maps a config name to its class), and the source-level ideas
(ideas.py) that genomes carry as genes."""

from evo.search.base import Proposal, Proposer
from evo.search.evolutionary import Evolutionary
from evo.search.optuna_samplers import NSGA2, TPE, OptunaSampler
from evo.search.random_search import RandomSearch
from evo.search.surrogate import Surrogate

PROPOSERS: dict[str, type[Proposer]] = {
    "evolutionary": Evolutionary,
    "random": RandomSearch,
    "tpe": TPE,
    "nsga2": NSGA2,
    "optuna": OptunaSampler,
    "surrogate": Surrogate,
}

__all__ = [
    "PROPOSERS",
    "Proposal",
    "Proposer",
    "Evolutionary",
    "RandomSearch",
    "TPE",
    "NSGA2",
    "OptunaSampler",
    "Surrogate",
]
