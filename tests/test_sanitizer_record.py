"""The sanitizer's records are core types (evo/core/sanitizer_record.py): the tool runner (evo/measure/sanitize.py)
builds its evidence without importing the judge, the gate judges it (gates/sanitizer.py ``judged``), and the layer
contracts hold without indirect imports allowed (issue #41 item 5: evo.measure imported gates.sanitizer)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from evo.core.records import Code
from evo.core.sanitizer_record import SanitizerRun, ToolReport, describe
from gates.sanitizer import judged

ROOT = Path(__file__).resolve().parent.parent

RUN_STEP = """
import json, sys
from types import SimpleNamespace
from evo.measure.sanitize import run_step
run = run_step(SimpleNamespace(), SimpleNamespace(id=1, genome={}), {}, "recorded", True, out=lambda s: None)
print(json.dumps([type(run).__module__, run.skipped, sorted(m for m in sys.modules if m.split(".")[0] == "gates")]))
"""


def test_running_the_tools_loads_no_gate():
    """Where no tool can run (the recorded backend) run_step says why in the core record, and nothing of gates/ is
    loaded: before, it imported gates.sanitizer for its records."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", RUN_STEP], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    module, skipped, gates = json.loads(r.stdout.strip().splitlines()[-1])
    assert module == "evo.core.sanitizer_record" and "recorded backend runs no kernel" in skipped
    assert gates == []


def test_the_gate_judges_the_core_record():
    clean = judged(SanitizerRun([ToolReport("memcheck", "clean", 0)], extra={"version": "1"}), (), {})
    assert clean.verdict.ok and clean.record["checked"] and clean.record["version"] == "1"
    found = judged(SanitizerRun([ToolReport("memcheck", "errors", 1, ["Invalid __global__ write"])]), (), {})
    assert found.verdict.code is Code.SANITIZER_FINDING
    none = judged(SanitizerRun(skipped="no tool here"), (), {"x": 1})
    assert none.verdict.ok and describe(none.record) == "not sanitizer-checked (no tool here)"


def test_no_layer_contract_allows_indirect_imports():
    """lint-imports checks chains too (a module reaching a forbidden one through another); the exceptions are the
    contracts' ignore_imports, each with its reason in pyproject.toml."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    forbidden = [c for c in contracts if c["type"] == "forbidden"]
    assert len(forbidden) >= 4
    assert [c["name"] for c in forbidden if c.get("allow_indirect_imports", True)] == []
    assert any(c["source_modules"] == ["evo.measure"] and c["forbidden_modules"] == ["gates"] for c in forbidden)
