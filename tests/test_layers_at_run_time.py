"""The layers hold at run time, not only in the import graph lint-imports reads: importing every module of one
layer, in a fresh interpreter, loads nothing of a layer above it (issue #41 item 5). lint-imports skips what a
package's __init__ runs; `import gates` used to run evo/__init__.py, which loaded
evo.config, the ledger and the sanitizer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALWAYS = ("evo", "evo._namespace", "evo._version", "evo.stop")  # evo/__init__.py's own, loaded by any import
EVO_LAYERS = ["evo.core", "evo.ledger", "evo.search", "evo.measure", "evo.report", "evo.config", "evo.loop", "evo.cli"]
# what each may load beside ALWAYS: the layers below it, and gates/harness where pyproject's contracts allow them
ALLOWED = {
    "evo.core": ("evo.core",),
    "gates": ("gates", "evo.core"),
    "harness": ("harness", "gates", "evo.core"),
}
# evo's top-level modules outside the layers (pyproject: backends, inputs, check, ...), used from the config up
OUTSIDE = tuple(f"evo.{p.stem}" for p in (ROOT / "evo").glob("*.py") if p.stem not in ("__init__", "config"))
for i, layer in enumerate(EVO_LAYERS[1:], start=1):
    ALLOWED[layer] = (
        *EVO_LAYERS[: i + 1],
        "gates",
        "harness",
        *(OUTSIDE if i >= EVO_LAYERS.index("evo.config") else ()),
    )

PROBE = """
import importlib, json, pkgutil, sys
pkg = importlib.import_module(sys.argv[1])
names = [sys.argv[1]]
if hasattr(pkg, "__path__"):
    names += [m.name for m in pkgutil.walk_packages(pkg.__path__, sys.argv[1] + ".")]
for n in names:
    importlib.import_module(n)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("evo", "harness", "gates"))))
"""


def _inside(module: str, prefixes: tuple[str, ...]) -> bool:
    return module in ALWAYS or any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imported_alone_loads_nothing_above_it(layer):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-c", PROBE, layer], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    above = [m for m in loaded if not _inside(m, ALLOWED[layer])]
    assert not above, f"importing {layer} loads {above}"


def test_the_probe_sees_a_leak():
    """The check can fail: evo.cli is above evo.config, so its modules load evo.config."""
    assert not _inside("evo.config", ALLOWED["evo.report"])
    assert _inside("evo.config", ALLOWED["evo.loop"]) and not _inside("evo.loop.campaign", ALLOWED["evo.config"])
