"""Search strategies, one module each (``PROPOSERS`` maps a config's ``proposer.name`` to its class), and the
source-level ideas (ideas.py) that genomes carry as genes.

A strategy from outside evo is one module of an installed package that registers its class when imported, named
under the ``evo.proposers`` entry-point group (docs/extending.md, "A proposer of your own"); such modules are imported
once, when ``PROPOSERS`` is first read (evo/core/plugins.py)::

    from evo.search import Proposer, register_proposer

    @register_proposer("mine")
    class Mine(Proposer):
        ...
"""

from collections.abc import Callable
from typing import TypeVar

from evo.core.plugins import Registry
from evo.search.base import Proposal, Proposer
from evo.search.evolutionary import Evolutionary
from evo.search.optuna_samplers import NSGA2, TPE, OptunaSampler
from evo.search.random_search import RandomSearch
from evo.search.surrogate import Surrogate

ENTRY_POINT_GROUP = "evo.proposers"
PROPOSERS: Registry[type[Proposer]] = Registry(ENTRY_POINT_GROUP, "proposer")
P = TypeVar("P", bound=type[Proposer])


def register_proposer(name: str) -> Callable[[P], P]:
    """Class decorator: register a Proposer subclass as ``proposer.name: <name>``; called when its module is
    imported (evo's own below, a plug-in's when PROPOSERS is first read). A name taken is a PluginError."""

    def deco(cls: P) -> P:
        PROPOSERS.register(name, cls)
        return cls

    return deco


for _name, _cls in {
    "evolutionary": Evolutionary,
    "random": RandomSearch,
    "tpe": TPE,
    "nsga2": NSGA2,
    "optuna": OptunaSampler,
    "surrogate": Surrogate,
}.items():
    register_proposer(_name)(_cls)
del _name, _cls

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROPOSERS",
    "register_proposer",
    "Proposal",
    "Proposer",
    "Evolutionary",
    "RandomSearch",
    "TPE",
    "NSGA2",
    "OptunaSampler",
    "Surrogate",
]
