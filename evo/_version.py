"""evo's version, from one place: pyproject.toml's ``[project] version``.

Installed (a wheel, or pip install -e), the distribution's metadata carries it (importlib.metadata); imported from
a source checkout, the pyproject.toml beside the evo folder is read instead, so that a checkout on PYTHONPATH says
its own version, not that of an evo installed elsewhere. Read once, when evo is imported (evo.__version__).
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

DISTRIBUTION = "evo-kernels"  # the name on the package index (`pip install evo-kernels`); the import name is evo


def _checkout_version() -> str | None:
    """pyproject.toml's version where evo is imported from a checkout of its repository, else None."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return str(project["version"]) if project.get("name") == DISTRIBUTION and "version" in project else None


def evo_version() -> str:
    """The version of the evo being imported ("0+unknown" where neither source says it)."""
    found = _checkout_version()
    if found is not None:
        return found
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
