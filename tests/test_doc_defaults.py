"""Defaults quoted in docs/measurement.md are the config's (issue #41 item 6: the doc gave batch_ms a default of 10
ms where the config's is 1): each "(`key`, default N" in the doc is read and held against gates.perf's field."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from evo.config import PerfGateConfig

ROOT = Path(__file__).resolve().parent.parent
QUOTED = re.compile(r"\(`(\w+)`, default (\d+(?:\.\d+)?)")


def test_every_default_docs_measurement_quotes_is_the_configs():
    text = (ROOT / "docs" / "measurement.md").read_text()
    fields = {f.name: f.default for f in dataclasses.fields(PerfGateConfig)}
    quoted = [(k, float(v)) for k, v in QUOTED.findall(text) if k in fields]
    assert len(quoted) >= 4, quoted  # batch_ms, rounds, early_rounds, ceiling_check at least
    wrong = [(k, v, fields[k]) for k, v in quoted if v != float(fields[k])]
    assert not wrong, wrong


def test_auto_backend_is_resolved_in_one_place(monkeypatch):
    """`auto` means gpu where a CUDA GPU is visible, else recorded: evo/backends.py says it, the loop, export and
    the sanitizer command ask it (it was written out in three places)."""
    import harness.gpu
    from evo.backends import resolve

    monkeypatch.setattr(harness.gpu, "gpu_available", lambda: False)
    assert (resolve("auto"), resolve("gpu"), resolve("recorded")) == ("recorded", "gpu", "recorded")
    monkeypatch.setattr(harness.gpu, "gpu_available", lambda: True)
    assert resolve("auto") == "gpu"
    rule = re.compile(r"""["']gpu["'] if gpu_available\(\)""")
    product = [p for d in ("evo", "harness", "gates") for p in (ROOT / d).rglob("*.py")]
    assert [p.relative_to(ROOT).as_posix() for p in product if rule.search(p.read_text())] == ["evo/backends.py"]
