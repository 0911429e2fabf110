"""evo: an automated, gated search harness for CUDA kernel variants.

The public names live in private-ish modules and are re-exported here.
"""

from evo import _namespace
from evo import stop as _stop
from evo._version import evo_version as _evo_version

if (_root := _namespace.checkout_root()) is not None:  # a checkout (editable or not): its own harness, gates
    _namespace.use_checkout(_root)
elif _namespace.packaged():  # a wheel: harness, gates are evo.harness, evo.gates
    _namespace.install()

if _stop._evo_command():  # the evo command: a Ctrl-C or SIGTERM during these imports is a stop request too
    _stop.install()

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
