"""Search strategies, one module each; ``PROPOSERS`` maps a config name to its class."""

from evo.proposers.base import Proposal, Proposer
from evo.proposers.evolutionary import Evolutionary
from evo.proposers.optuna_samplers import NSGA2, TPE, OptunaSampler
from evo.proposers.random_search import RandomSearch
from evo.proposers.surrogate import Surrogate

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
