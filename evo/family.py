"""The public API for families: the Family interface (Family, Geometry, GeometryParam, Knob, Launch, OutputSpec,
...) and family discovery.

Families (candidates/, examples/, the ``evo new`` templates, users' own repositories) import from here, e.g.
``from evo.family import ...``; this path stays stable. The module itself is evo/core/family.py (evo's core types,
which import nothing above them); evo's own code imports it from there.
"""

from evo.core.family import (
    CANDIDATES_DIR,
    CONFIGS_DIR,
    ENTRY_POINT_GROUP,
    PATH_ENV,
    SANITIZER_TOOLS,
    Family,
    FamilyError,
    FamilySource,
    Geometry,
    GeometryParam,
    Knob,
    Launch,
    OutputSpec,
    SanitizerSuppression,
    check_family_name,
    family_names,
    family_problem,
    find_families,
    inout_problem,
    is_family_path,
    load_family,
    load_source,
    resolve_family,
)

__all__ = [
    "CANDIDATES_DIR",
    "CONFIGS_DIR",
    "ENTRY_POINT_GROUP",
    "Family",
    "FamilyError",
    "FamilySource",
    "Geometry",
    "GeometryParam",
    "Knob",
    "Launch",
    "OutputSpec",
    "PATH_ENV",
    "SANITIZER_TOOLS",
    "SanitizerSuppression",
    "check_family_name",
    "family_names",
    "family_problem",
    "find_families",
    "inout_problem",
    "is_family_path",
    "load_family",
    "load_source",
    "resolve_family",
]
