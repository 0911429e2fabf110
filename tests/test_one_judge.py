"""One judge (issue 41): every path that judges a genome calls gates.judge, so a gate replaced through the registry
from outside evo runs in `evo run`, `evo replay` and `evo ablate` alike; and no module outside gates/ calls a gate
function or orders the gates itself."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from evo.cli import main
from evo.config import load_config
from evo.core.genome import Genome
from evo.core.records import Attempt, Verdict
from evo.ledger.ledger import Ledger
from evo.report.ablation import changes, without
from gates import registry
from gates.judge import OUTPUTS, JudgeContext, References, judge, pipeline
from gates.registry import GateError, gate_order
from tests.test_ablate import _config
from tests.test_gate_registry import _install_plugin, own_registry  # noqa: F401  (the fixture)
from tests.test_sanitize import fake  # noqa: F401  (the fixture: a fake compute-sanitizer)

ROOT = Path(__file__).resolve().parent.parent

# A site's own correctness gate, installed as a package of its own: the built-in's judgement, plus a rule that
# refuses the genomes named in REFUSE and one genome in three (by a stable digest of its key) in `evo run`.
PLUGIN = '''
import hashlib

from evo.core.records import Code, Verdict
from gates.pipeline.correctness import correctness as builtin
from gates.registry import register_gate

SEEN = []
REFUSE = set()


def refused(key):
    return key in REFUSE or int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0


@register_gate("correctness", order=60, replace=True)
def correctness(step):
    """The built-in correctness gate, and a site rule on top."""
    key = step.proposal.genome.key
    SEEN.append(key)
    if refused(key):
        return Verdict.rejected("correctness", "refused by the site rule", Code.CORRECTNESS_HASH)
    return builtin(step)
'''


def test_a_replaced_gate_judges_in_evo_run_evo_replay_and_evo_ablate(tmp_path, monkeypatch, own_registry, capsys):  # noqa: F811
    _install_plugin(tmp_path, monkeypatch, PLUGIN)
    path = _config(tmp_path, 10)
    assert main(["run", str(path), "--plain"]) == 0
    plugin = sys.modules["evo_policy_gate"]
    cfg = load_config(path)
    led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)
    atts = led.attempts()
    refused = [a for a in atts if a.verdict.reason == "refused by the site rule"]
    assert refused, "the seeded run proposes a genome the site rule refuses (else this checks nothing)"
    assert all(plugin.refused(a.genome_key) and not a.timings for a in refused)
    assert {a.genome_key for a in refused} <= set(plugin.SEEN)

    plugin.SEEN.clear()  # evo replay: the correctness rejections re-judged, through the replaced gate
    assert main(["replay", str(path), "--gate", "correctness"]) == 0
    assert {a.genome_key for a in refused} <= set(plugin.SEEN)
    side = Ledger(cfg.storage, f"{cfg.campaign}:replay", cfg.family.knobs).attempts()
    assert {a.genome_key for a in side if a.verdict.reason == "refused by the site rule"} == {
        a.genome_key for a in refused
    }

    # evo ablate: each ablation of the champion is judged by the same gate; one it refuses is not timed
    base = next(a for a in atts if a.verdict.status == "baseline")
    champ = led.champion()
    keys = changes(base.genome, champ.genome)
    ablations = [without(champ.genome, base.genome, k) for k in keys]
    judged = [g.key for g in ablations if g.key != base.genome_key]
    assert len(judged) >= 2, f"the champion needs two changes whose ablations are judged ({keys})"
    plugin.SEEN.clear()
    plugin.REFUSE.add(judged[0])
    capsys.readouterr()
    assert main(["ablate", str(path), "--rounds", "4"]) == 0
    assert set(plugin.SEEN) >= set(judged) - {g.key for g in ablations if cfg.family.check(g, cfg.geometries)}
    record = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs).meta("ablations")[-1]
    entry = next(e for e in record["changes"] if Genome(e.get("genome", {})).key == judged[0])
    assert "refused by the site rule" in entry["error"]


@pytest.mark.gpu
def test_export_check_on_the_gpu_judges_through_the_replaced_gate(tmp_path, monkeypatch, own_registry):  # noqa: F811
    """`evo export --check` on a GPU: the exported file's outputs go through the registry's correctness gate."""
    from evo.report.export import check_final

    _install_plugin(tmp_path, monkeypatch, PLUGIN)
    path = _config(tmp_path, 12)
    assert main(["run", str(path), "--plain"]) == 0  # a recorded campaign: its champion's file is exported
    out = tmp_path / "export"
    assert main(["export", str(path), "-o", str(out)]) == 0
    plugin = sys.modules["evo_policy_gate"]
    cfg = load_config(path)
    led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)
    champ = led.champion()
    final = out / f"{cfg.family.name}.cu"
    key = cfg.family.genome({k.name: champ.genome[k.name] for k in cfg.family.knobs}).key
    plugin.SEEN.clear()
    ok, lines = check_final(cfg, led.attempts(), led.all_meta(), final, "gpu")
    assert plugin.SEEN == [key], lines
    assert ok and "correctness gate on the GPU" in lines[-1] and "passed" in lines[-1], lines
    plugin.REFUSE.add(key)
    ok, lines = check_final(cfg, led.attempts(), led.all_meta(), final, "gpu")
    assert not ok and "FAILED: refused by the site rule" in lines[-1], lines


def test_only_runs_the_named_gates_in_the_judges_order_and_a_pass_is_pass(own_registry):  # noqa: F811
    class Refs:
        baseline_hashes = {"g/0/y": "h"}
        baseline_errors = {"g/0/y": 1e-3}

    from gates.correctness import CorrectnessEvidence, OutputCheck

    cfg = load_config(ROOT / "configs" / "mhc_pre_big_fuse.yaml")
    ctx = JudgeContext.standalone(cfg, references=References(Refs.baseline_hashes, Refs.baseline_errors))
    genome = cfg.family.baseline()

    class Prop:
        pass

    prop = Prop()
    prop.genome = genome  # type: ignore[attr-defined]
    same = CorrectnessEvidence([OutputCheck("g", 0, "y", ["h", "h"], 0, 0, 1e-4, 0.0, 0)])
    moved = CorrectnessEvidence([OutputCheck("g", 0, "y", ["x", "x"], 0, 0, 1e-4, 0.0, 0)])
    v, ev = judge(prop, ctx, only=OUTPUTS, outputs=same)
    assert (
        v.status == "pass" and ev.attempt.genome_key == genome.key and ev.attempt.output_hashes == {"g": {"0/y": "h"}}
    )
    v, _ = judge(prop, ctx, only=OUTPUTS, outputs=moved)
    assert not v.ok and v.gate == "correctness"
    with pytest.raises(GateError, match="no gate named correctnes"):
        judge(prop, ctx, only=("correctnes",), outputs=same)
    with pytest.raises(GateError, match="the sanitizer is the campaign's"):
        ctx.sanitize(Attempt(0, "", "", {}, ""), False)

    def mine(step) -> Verdict | None:
        return Verdict.rejected("perf", "mine")

    swapped = pipeline(builtin=True, replace={"perf": mine})
    assert [g.name for g in swapped] == [g.name for g in registry.builtin_gates()]
    assert next(g for g in swapped if g.name == "perf").check is mine
    assert next(g for g in gate_order() if g.name == "perf").check is not mine  # the registry itself unchanged


# --- no gate function outside the judge ------------------------------------------------------------------------------
# What only gates/ may call: the gate functions (gates/correctness.py, perf.py, static.py, sanitizer.py, bound.py),
# the registered gates' checks, and the registry's order. The evidence types, statistics and record helpers are free.
GATE_FUNCTIONS = {
    "correctness_gate",
    "perf_gate",
    "static_gate",
    "sanitizer_gate",
    "bound_gate",
    "baseline_problem",
    "identical_variant",
    "identical_sass",
    "gate_order",
    "builtin_gates",
    "load_gates",
    "get_gate",
    "RegisteredGate",
    "measure_and_judge",
    "decode_bound",
}
PRODUCT = ("evo", "harness", "tools", "candidates", "examples")  # gates/ is the judge; tests check gates themselves


def _python_files() -> list[Path]:
    return [p for d in PRODUCT for p in sorted((ROOT / d).rglob("*.py")) if "templates" not in p.parts]


def _offences(path: Path, name: str = "") -> list[str]:
    """Gate functions ``path`` imports from gates (by name, or as the registry's checks), or calls off ``gates.``."""
    text = path.read_text()
    name = name or str(path.relative_to(ROOT))
    tree = ast.parse(text)
    checks = {g.check.__name__ for g in gate_order()}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gates":
            mod = node.module or ""
            for alias in node.names:
                builtin_check = mod.startswith("gates.pipeline") and alias.name in checks
                if alias.name in GATE_FUNCTIONS or builtin_check:
                    found.append(f"{name}:{node.lineno}: imports {alias.name} from {mod}")
    for m in re.finditer(r"\bgates(?:\.\w+)*\.(\w+)\(", text):
        if m.group(1) in GATE_FUNCTIONS:
            found.append(f"{name}: calls gates...{m.group(1)}")
    return found


def test_no_module_outside_the_judge_calls_a_gate_function():
    files = _python_files()
    assert any(p.parts[-3:] == ("evo", "loop", "ablate.py") for p in files)  # the walk sees the product
    bad = [o for p in files for o in _offences(p)]
    assert not bad, "judge through gates.judge (judge(..., only=...)), not the gate functions:\n" + "\n".join(bad)


def test_the_offence_finder_finds_one(tmp_path):
    p = tmp_path / "probe.py"
    p.write_text("from gates.correctness import correctness_gate\nimport gates\ngates.perf.perf_gate(1)\n")
    assert len(_offences(p, "probe.py")) == 2
    p.write_text("from gates.pipeline.static import static\nfrom gates.judge import judge\n")
    assert [o.split(": ")[1] for o in _offences(p, "probe.py")] == ["imports static from gates.pipeline.static"]


def test_the_sanitizer_gate_judges_the_tools_run(fake, tmp_path):  # noqa: F811
    """The tools run where the campaign says (evo/measure/sanitize.run_step, a fake compute-sanitizer here); the
    judging is the sanitizer gate's own: clean passes with its record, a finding rejects, no tool is unchecked."""
    import dataclasses

    from evo.core.records import Code
    from evo.measure.sanitize import run_step
    from tests.test_sanitize import write_config as sanitizer_config

    cfg = load_config(sanitizer_config(tmp_path))
    genome = cfg.family.baseline()

    class Prop:
        pass

    prop = Prop()
    prop.genome = genome  # type: ignore[attr-defined]

    def judged(backend: str) -> Verdict:
        run = lambda a, source_variant: run_step(cfg, a, {}, backend, backend != "gpu", source_variant, print)  # noqa: E731
        ctx = dataclasses.replace(JudgeContext.standalone(cfg), sanitize=run)
        a = Attempt(7, "t", cfg.family.name, dict(genome), genome.key, verdict=Verdict.accepted("faster", {"x": 1}))
        return judge(prop, ctx, a, gates=pipeline(("sanitizer",)))[0]

    fake("clean")
    v = judged("gpu")
    assert v.status == "accepted" and v.detail["x"] == 1 and v.reason == "faster"
    rec = v.detail["sanitizer"]
    assert rec["checked"] and rec["version"] == "2099.1.0.0" and set(rec["durations_s"]) == set(cfg.sanitizer.tools)
    fake("errors")
    v = judged("gpu")
    assert not v.ok and v.code is Code.SANITIZER_FINDING
    v = judged("recorded")
    assert v.ok and not v.detail["sanitizer"]["checked"] and "recorded" in v.detail["sanitizer"]["unchecked"][""]
