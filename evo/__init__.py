"""evo: an automated, gated search harness for CUDA kernel variants.

The public names live in private-ish modules and are re-exported here.
"""

from typing import TYPE_CHECKING, Any

from evo import _namespace
from evo import stop as _stop
from evo._version import evo_version as _evo_version

if (_root := _namespace.checkout_root()) is not None:  # a checkout (editable or not): its own harness, gates
    _namespace.use_checkout(_root)
elif _namespace.packaged():  # a wheel: harness, gates are evo.harness, evo.gates
    _namespace.install()

if _stop._evo_command():  # the evo command: a Ctrl-C or SIGTERM during these imports is a stop request too
    _stop.install()

# The public names, imported when first used (PEP 562): `import gates` or `import evo.core.family` runs this file
# first, and must load nothing of the layers above it (evo.config pulls in the ledger and the sanitizer).
_PUBLIC = {
    "evo.config": ("CampaignConfig", "ConfigError", "load_config"),
    "evo.core.family": ("Family", "Geometry", "GeometryParam", "Knob", "Launch", "OutputSpec", "load_family"),
    "evo.core.genome": ("Genome",),
    "evo.core.records": ("Attempt", "Code", "Interval", "Resources", "Timing", "Verdict"),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'evo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # once
    return value


if TYPE_CHECKING:
    from evo.config import CampaignConfig, ConfigError, load_config
    from evo.core.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec, load_family
    from evo.core.genome import Genome
    from evo.core.records import Attempt, Code, Interval, Resources, Timing, Verdict

__all__ = [
    "Attempt",
    "CampaignConfig",
    "Code",
    "ConfigError",
    "Family",
    "Genome",
    "Geometry",
    "GeometryParam",
    "Interval",
    "Knob",
    "Launch",
    "OutputSpec",
    "Resources",
    "Timing",
    "Verdict",
    "load_config",
    "load_family",
]
__version__ = _evo_version()
