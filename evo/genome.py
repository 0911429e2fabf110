"""The public API for families: the Genome type.

Families (candidates/, examples/, the ``evo new`` templates, users' own repositories) import from here, e.g.
``from evo.genome import ...``; this path stays stable. The module itself is evo/core/genome.py (evo's core types,
which import nothing above them); evo's own code imports it from there.
"""

from evo.core.genome import (
    Genome,
)

__all__ = [
    "Genome",
]
