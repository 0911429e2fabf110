"""Gates by name (gates/registry.py): a gate from outside evo, installed as an ``evo.gates`` entry point, runs in
``evo run`` and ``evo replay`` alike; the judge runs the registry's order; a name is not taken twice by accident."""

from __future__ import annotations

import sys
import textwrap

import pytest

from evo.cli import main
from evo.config import load_config
from evo.core.records import Verdict
from evo.ledger.ledger import Ledger
from gates import registry
from gates.registry import GateError, gate_order, register_gate
from tests.test_campaign import write_config

PLUGIN = '''
"""A user's gate, in a package of its own: every attempt past the static gate is seen; block 512 is refused."""

from gates.registry import register_gate
from evo.core.records import Verdict

SEEN = []


@register_gate("policy", order=25)  # after static (20), before identical_sass (30)
def policy(step):
    SEEN.append(step.proposal.genome.key)
    if step.proposal.genome["block"] == 512:
        return Verdict.rejected("policy", "block 512 is against this site's policy")
    return None
'''


@pytest.fixture
def own_registry(monkeypatch):
    """The registry as it is now, restored after the test (a plug-in registered here leaves with it)."""
    gate_order()  # the built-ins registered before the copy
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_loaded", set(registry._loaded))
    yield
    sys.modules.pop("evo_policy_gate", None)


def _install_plugin(tmp_path, monkeypatch, text: str = PLUGIN) -> None:
    """The plug-in as pip installs one: its module and a dist-info naming it under the ``evo.gates`` group."""
    site = tmp_path / "site"
    (site / "evo_policy_gate-0.1.dist-info").mkdir(parents=True)
    (site / "evo_policy_gate.py").write_text(textwrap.dedent(text))
    (site / "evo_policy_gate-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: evo-policy-gate\nVersion: 0.1\n"
    )
    (site / "evo_policy_gate-0.1.dist-info" / "entry_points.txt").write_text("[evo.gates]\npolicy = evo_policy_gate\n")
    monkeypatch.syspath_prepend(str(site))


def test_a_gate_installed_outside_evo_runs_in_evo_run_and_evo_replay(tmp_path, monkeypatch, own_registry, capsys):
    _install_plugin(tmp_path, monkeypatch)
    path = write_config(tmp_path, 20)
    assert main(["run", str(path), "--plain"]) == 0
    plugin = sys.modules["evo_policy_gate"]
    cfg = load_config(path)
    atts = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs).attempts()
    blocked = [a for a in atts if a.genome["block"] == 512 and a.id]
    assert blocked, "the seeded run proposes block 512 (else this test checks nothing)"
    assert all(a.verdict.gate == "policy" and not a.timings for a in blocked)
    assert {a.genome_key for a in blocked} <= set(plugin.SEEN)
    names = [g.name for g in gate_order()]
    assert names.index("static") < names.index("policy") < names.index("identical_sass")

    plugin.SEEN.clear()
    assert main(["replay", str(path), "--gate", "policy"]) == 0
    assert "verdict(s) changed" in capsys.readouterr().out
    assert sorted(plugin.SEEN) == sorted(a.genome_key for a in blocked)  # each re-judged through the plug-in
    side = Ledger(cfg.storage, f"{cfg.campaign}:replay", cfg.family.knobs).attempts()
    assert len(side) == len(blocked) and all(a.verdict.gate == "policy" for a in side)


def test_a_name_is_taken_once_unless_replaced(own_registry):
    def mine(step) -> Verdict | None:
        return None

    with pytest.raises(GateError, match="'static' is registered already"):
        register_gate("static", order=20)(mine)
    register_gate("static", order=20, replace=True)(mine)
    assert [g.check for g in gate_order() if g.name == "static"] == [mine]
    with pytest.raises(GateError, match="no gate named 'nope'"):
        registry.get_gate("nope")


def test_docs_list_the_builtin_gates_as_the_registry_has_them(own_registry):
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "gates.md").read_text()
    assert registry.markdown_table() in doc, "regenerate the table from gates.registry.markdown_table()"


def test_a_broken_plugin_is_one_line(tmp_path, monkeypatch, own_registry, capsys):
    _install_plugin(tmp_path, monkeypatch, "raise RuntimeError('no licence server')\n")
    assert main(["run", str(write_config(tmp_path, 3)), "--plain"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["evo: gate plug-in 'policy' (evo_policy_gate) could not be loaded: RuntimeError: no licence server"]
