"""Backends and proposers from outside evo (evo/core/plugins.py): a package installed with an ``evo.backends`` or
``evo.proposers`` entry point adds one by one module; its name is a config's and ``--backend``'s, and ``evo run``
runs a campaign on it; nothing loads until a registry is read; a plug-in that cannot load is one line naming it."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from evo import backends
from evo.cli import _parser, main
from evo.config import ConfigError, load_config
from evo.core.plugins import PluginError
from evo.ledger.ledger import Ledger
from evo.search import PROPOSERS
from tests.test_campaign import write_config

# A site's backend: the recorded measurements under a name of its own, counting the campaigns it served.
BACKEND = '''
"""The recorded H200 sweep, served as backend: replayed."""

from evo.backend_factories import recorded_backend, recorded_for_config
from evo.backends import BackendEntry, register

MADE = []


def make(cfg, builder):
    MADE.append(cfg.campaign)
    return recorded_for_config(cfg, builder)


def worker(config, backend=None, storage=None):  # in a worker process: leaves a mark beside the config
    open(config + ".served", "w").write(backend)
    return recorded_backend(config, backend, storage)


register(BackendEntry("replayed", f"{__name__}:make", f"{__name__}:worker", pdl=True))
'''

# A site's strategy: random search that counts its proposals.
PROPOSER = '''
"""Random search that counts what it proposes, as proposer.name: counted."""

from evo.search import register_proposer
from evo.search.random_search import RandomSearch

PROPOSED = []


@register_proposer("counted")
class Counted(RandomSearch):
    def propose(self, attempts, seen):
        p = super().propose(attempts, seen)
        PROPOSED.append(p)
        return p
'''

MODULES = ("evo_replayed_backend", "evo_counted_proposer", "evo_broken_backend")


@pytest.fixture
def own_registries(monkeypatch):
    """The backends' and proposers' registries as they are now, restored after the test (with its plug-ins)."""
    for reg in (backends.REGISTRY, PROPOSERS):
        list(reg)  # what is installed already loads before the copy
        monkeypatch.setattr(reg, "entries", dict(reg.entries))
        monkeypatch.setattr(reg.plugins, "done", dict(reg.plugins.done))
        monkeypatch.setattr(reg.plugins, "path", reg.plugins.path)
    yield
    for m in MODULES:
        sys.modules.pop(m, None)


def _install(tmp_path: Path, monkeypatch, module: str, text: str, group: str, name: str) -> None:
    """A package as pip installs one: its module and a dist-info naming it under ``group``."""
    site = tmp_path / "site"
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / f"{module}.py").write_text(textwrap.dedent(text))
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{name} = {module}\n")
    if str(site) not in sys.path:
        monkeypatch.syspath_prepend(str(site))


def _config(tmp_path: Path, attempts: int, extra: str = "", proposer: str = "random") -> Path:
    path = write_config(tmp_path, attempts, extra=extra)
    path.write_text(re.sub(r"name: surrogate\b", f"name: {proposer}", path.read_text()))
    return path


def test_a_backend_installed_outside_evo_runs_a_campaign(tmp_path, monkeypatch, own_registries, capsys):
    _install(tmp_path, monkeypatch, "evo_replayed_backend", BACKEND, "evo.backends", "replayed")
    _parser()  # building the CLI (its --backend choices) and importing the config load no plug-in
    assert "evo_replayed_backend" not in sys.modules
    path = _config(tmp_path, 6, extra="backend: replayed\n")
    cfg = load_config(path)  # the config's backend: is checked against the registry, which loads the plug-in
    assert cfg.backend == "replayed" and "replayed" in backends.BACKENDS
    plugin = sys.modules["evo_replayed_backend"]

    assert main(["run", str(path), "--plain"]) == 0
    assert plugin.MADE == [cfg.campaign]  # the campaign's backend came from the plug-in's factory
    atts = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs).attempts()
    assert len(atts) == 6 and all(a.timings for a in atts if a.verdict.gate != "correctness")  # #0: the baseline

    # --backend takes it too (the shipped config says recorded), isolated in a worker process (a fresh interpreter)
    other = write_config(tmp_path, 3, name="other", extra="worker: {isolation: worker, timeout_s: 60}\n")
    assert main(["run", str(other), "--plain", "--backend", "replayed"]) == 0
    assert Path(f"{other}.served").read_text() == "replayed" and plugin.MADE == [cfg.campaign]
    ocfg = load_config(other)
    assert len(Ledger(ocfg.storage, ocfg.campaign, ocfg.family.knobs).attempts()) == 3
    capsys.readouterr()  # and --help lists it
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "backend: auto, gpu, recorded, replayed" in " ".join(capsys.readouterr().out.split())


def test_a_name_no_backend_has_is_refused_with_the_names_there_are(tmp_path, own_registries, capsys):
    path = _config(tmp_path, 3, extra="backend: replayd\n")
    with pytest.raises(ConfigError, match=r"backend: 'replayd' is not allowed \(allowed: auto, gpu, recorded\)"):
        load_config(path)
    with pytest.raises(SystemExit) as e:
        main(["run", str(path), "--backend", "nope"])
    assert e.value.code == 2 and "invalid choice: 'nope' (choose from 'auto', 'gpu', 'recorded')" in (
        capsys.readouterr().err
    )
    with pytest.raises(PluginError, match="backend 'auto' is registered already"):
        backends.register(backends.BackendEntry("auto", "x:y", "x:y"))


def test_a_proposer_installed_outside_evo_proposes_in_evo_run(tmp_path, monkeypatch, own_registries):
    _install(tmp_path, monkeypatch, "evo_counted_proposer", PROPOSER, "evo.proposers", "counted")
    path = _config(tmp_path, 5, proposer="counted")
    assert main(["run", str(path), "--plain"]) == 0
    plugin = sys.modules["evo_counted_proposer"]
    cfg = load_config(path)
    assert cfg.proposer.name == "counted" and PROPOSERS["counted"] is plugin.Counted
    proposed = {p.genome.key for p in plugin.PROPOSED if p is not None}
    atts = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs).attempts()
    assert len(atts) == 5 and {a.genome_key for a in atts if a.id} <= proposed  # #0: the baseline


def test_a_plugin_that_cannot_load_is_one_line_naming_it(tmp_path, monkeypatch, own_registries, capsys):
    broken = "import evo_no_such_module\n"
    _install(tmp_path, monkeypatch, "evo_broken_backend", broken, "evo.backends", "broken")
    line = (
        "backend plug-in 'broken' (evo_broken_backend) could not be loaded: "
        "ModuleNotFoundError: No module named 'evo_no_such_module'"
    )
    path = _config(tmp_path, 3, extra="backend: replayed\n")
    assert main(["run", str(path), "--plain"]) == 2  # met as the config's backend: is checked
    assert capsys.readouterr().err == f"evo: {line}\n"
    assert main(["run", str(path), "--plain", "--backend", "recorded"]) == 2  # met as --backend is parsed
    assert capsys.readouterr().err == f"evo: {line}\n"
    with pytest.raises(PluginError, match=re.escape(line)):  # again on every read, not once and then forgotten
        list(backends.REGISTRY)
