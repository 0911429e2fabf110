"""The config schema is declared once (evo/config.py's dataclasses, the proposers' OPTIONS tables) and everything
reads it: the loader's checks and defaults, `evo config`, and docs/config.md."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evo import config as C
from evo.config import ConfigError, load_config
from evo.search import PROPOSERS

ROOT = Path(__file__).resolve().parent.parent
BASE: dict[str, Any] = {
    "campaign": "t",
    "family": "mhc_pre_big_fuse",
    "geometries": [{"name": "a", "T": 64, "H": 4096, "weight": 1}],
    "budget": {"attempts": 5},
}
# sections whose keys can be set alone on BASE (bound, e2e and ideas.proposer need a profile or a command first)
PLAIN = [
    (path, cls)
    for path, cls in C.sections()
    if not path.endswith("[]") and (not path or not any(sk.key.required for sk in C.schema(cls).values()))
]


def _load(tmp_path: Path, doc: dict[str, Any]) -> C.CampaignConfig:
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_config(p)


def _nested(path: str, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out


def _at(cfg: Any, path: str) -> Any:
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _plain_keys() -> list[tuple[str, C.SchemaKey]]:
    return [
        (_join(path, name), sk)
        for path, cls in PLAIN
        for name, sk in C.schema(cls).items()
        if not sk.key.custom and sk.section is None
    ]


def test_docs_config_md_is_current():
    text = (ROOT / "docs" / "config.md").read_text()
    assert text == C.schema_markdown(), "docs/config.md is stale: run `evo config --markdown > docs/config.md`"


def test_every_field_of_every_section_is_declared():
    for path, cls in C.sections():
        undeclared = [f.name for f in dataclasses.fields(cls) if "key" not in f.metadata and f.name != "path"]
        assert not undeclared, f"{path or 'top level'}: {undeclared} have no key(...) declaration"
        for name, sk in C.schema(cls).items():
            assert sk.key.doc, f"{path}.{name}: no doc"


def test_an_unknown_key_is_refused_with_the_declared_keys(tmp_path):
    for path, cls in PLAIN:
        with pytest.raises(ConfigError) as ei:
            _load(tmp_path, {**BASE, **_nested(_join(path, "colour"), 1)})
        assert (
            str(ei.value) == f"{_join(path, 'colour')}: unknown key (allowed here: {', '.join(sorted(C.schema(cls)))})"
        )


@pytest.mark.parametrize("path, sk", _plain_keys(), ids=[p for p, _ in _plain_keys()])
def test_defaults_and_ranges_come_from_the_declaration(tmp_path, path, sk):
    parent = path.rpartition(".")[0]
    if path.split(".")[0] not in BASE:  # BASE sets budget.attempts
        given = {**BASE, **_nested(parent, {})} if parent else BASE  # ideas: {} (absent, there are no ideas)
        assert _at(_load(tmp_path, given), path) == sk.default, f"{path}: the loader's default is not the declared one"
    k = sk.key
    if k.choices:
        assert _at(_load(tmp_path, {**BASE, **_nested(path, k.choices[-1])}), path) == k.choices[-1]
        with pytest.raises(
            ConfigError, match=re.escape(f"{path}: 'nope' is not allowed (allowed: {', '.join(k.choices)})")
        ):
            _load(tmp_path, {**BASE, **_nested(path, "nope")})
    for bad in ([k.hi * 2 + 1] if k.hi is not None else []) + ([k.lo - 1] if k.lo is not None else []):
        bad = int(bad) if sk.type is int else float(bad)
        with pytest.raises(ConfigError) as ei:
            _load(tmp_path, {**BASE, **_nested(path, bad)})
        msg = str(ei.value)
        assert "\n" not in msg and msg.startswith(f"{path}: {bad!r} is out of range (allowed: "), msg


def test_a_section_key_without_a_range_check_is_custom():
    # a plain key needs a type the loader checks (number, choice, bool, string); anything else has code of its own
    for path, sk in _plain_keys():
        assert sk.type in (int, float, bool, str), f"{path}: {sk.type} needs custom=True and code in the loader"


def test_the_default_proposer_is_stated_once_and_everywhere_the_same(tmp_path):
    assert C.ProposerConfig.name == "surrogate"  # docs/search-efficiency.md: fewest evaluations on every sweep
    assert _load(tmp_path, BASE).proposer.name == "surrogate"
    assert "proposer: {name: surrogate}" in (ROOT / "README.md").read_text()
    assert "default `surrogate`" in (ROOT / "docs" / "config.md").read_text()
    assert "proposer: {{name: surrogate}}" in (ROOT / "evo" / "templates" / "family" / "evo.yaml").read_text()


@pytest.mark.parametrize("pname", sorted(PROPOSERS))
def test_proposer_options_come_from_the_table(tmp_path, pname):
    cls = PROPOSERS[pname]
    cfg = _load(tmp_path, BASE)
    prop = cls(cfg.family, cfg.geometries, {}, 0)
    for name, opt in cls.OPTIONS.items():
        assert prop.opt(name) == opt.default, f"{pname}.{name}: the proposer does not read the table's default"
        if opt.lo is None or opt.hi is None:
            continue
        bad = opt.hi * 2 + 1
        bad = int(bad) if isinstance(opt.default, int) else float(bad)
        doc = {**BASE, "proposer": {"name": pname, "options": {name: bad}}}
        with pytest.raises(ConfigError) as ei:
            _load(tmp_path, doc)
        assert str(ei.value) == f"proposer.options.{name}: {bad!r} is out of range (allowed: {opt.allowed_text})"
        ok = {**BASE, "proposer": {"name": pname, "options": {name: opt.default}}}
        assert _load(tmp_path, ok).proposer.options == {name: opt.default}


def test_no_proposer_states_an_option_default_in_code():
    """A default given beside a read (``options.get("x", 0.5)``) would be a second statement of the table's."""
    for f in sorted((ROOT / "evo" / "search").glob("*.py")):
        literal = re.search(r"options\.get\(\s*\"\w+\"\s*,\s*(?:[-\d.{\[\"']|True|False|None)", f.read_text())
        assert literal is None, f"{f.name}: {literal.group(0)}...: read the table's default with self.opt()"


def test_evo_config_prints_the_schema_and_refuses_an_unknown_section():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's evo, whichever one is installed

    def evo_config(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "evo", "config", *args], capture_output=True, text=True, cwd=ROOT, env=env
        )

    out = evo_config("gates.perf").stdout
    assert out.splitlines()[0] == "gates.perf:"
    assert re.search(r"^  rounds .*allowed: >= 6 and <= 1000; default: 12\]$", out, re.M), out
    assert "gates.static" not in out
    assert evo_config("--markdown").stdout == C.schema_markdown()
    bad = evo_config("gates.prf")
    assert bad.returncode == 2 and bad.stdout == ""
    assert (
        bad.stderr.startswith("evo: config: 'gates.prf' is not a section (sections: ") and bad.stderr.count("\n") == 1
    )
