"""evo export: knob conditionals resolved, a patch series that `git am` applies, and the same machine code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from evo.core.family import load_family
from evo.core.genome import Genome
from evo.report.export import export, lasting_series, resolve_conditionals, resolved_kernel
from harness.build import compile_source, resolve_source, sass_digest

FAM = load_family("mhc_pre_big_fuse")


def test_resolve_conditionals_keeps_undecided_and_drops_decided():
    src = "\n".join(
        [
            "#if EVO_A == 1",
            "a1",
            "#elif EVO_A == 2",
            "a2",
            "#else",
            "a3",
            "#endif",
            "#if EVO_A == 1 && EVO_S > 1",
            "both",
            "#endif",
            "#if EVO_A == 2 && EVO_S > 1",
            "never",
            "#endif",
            "#ifndef EVO_S",
            "#define EVO_S 1",
            "#endif",
            "",
        ]
    )
    out = resolve_conditionals(src, {"EVO_A": 2})
    assert "a2" in out and "a1" not in out and "a3" not in out and "#elif" not in out
    assert "#if 2 == 1 && EVO_S > 1" not in out and "never" in out  # A==2: condition reduces to EVO_S > 1
    assert "#ifndef EVO_S" in out  # a geometry macro stays
    out1 = resolve_conditionals(src, {"EVO_A": 1})
    assert "a1" in out1 and "both" in out1 and "never" not in out1


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"meta": "slice", "barrier": "early"},
        {"split_reduce": "warp", "vec": 8, "unroll": 4, "h_split": 2, "block": 128},
        {"warp0_stream": True, "meta": "slice"},
    ],
)
@pytest.mark.parametrize("spec", [{"S": 1, "prenorm": False}, {"S": 32, "prenorm": False}, {"S": 1, "prenorm": True}])
def test_resolved_kernel_compiles_to_the_same_machine_code(changes, spec):
    g = FAM.baseline().replace(**changes)
    ref, _, _ = compile_source(resolve_source(FAM, g, spec), FAM.entry, "sm_90")
    spec_defs = "".join(f"#define EVO_{k.upper()} {int(v)}\n" for k, v in spec.items())
    mine, _, _ = compile_source(spec_defs + resolved_kernel(FAM, g), FAM.entry, "sm_90")
    assert sass_digest(mine) == sass_digest(ref)


def _campaign(tmp_path: Path, attempts: int) -> Path:
    text = Path("configs/mhc_pre_big_fuse.yaml").read_text()
    text = text.replace("backend: auto", "backend: recorded")
    text += f"\nstorage: sqlite:///{tmp_path}/ledger.db\n"
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    return cfg


def test_export_series_applies_with_git_am(tmp_path, monkeypatch):
    from evo.config import load_config
    from evo.loop.campaign import Campaign

    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    cfg = load_config(_campaign(tmp_path, 40))
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    attempts = camp.ledger.attempts()
    accepted = [a for a in attempts if a.verdict.status == "accepted"]
    assert accepted, "the recorded campaign should accept at least one step in 40 attempts"
    out = tmp_path / "export"
    patches = export(FAM, attempts, camp.ledger.all_meta(), out)
    series = lasting_series(attempts[0], accepted)  # steps that undo earlier ones are squashed into one patch
    assert len(patches) == len(series)
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(tmp_path),
    }
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, text=True, env=env)  # noqa: E731
    run("init", "-q")
    (repo / "mhc_pre_big_fuse.cu").write_text((out / "baseline-mhc_pre_big_fuse.cu").read_text())
    run("add", ".")
    run("commit", "-q", "-m", "baseline")
    run("am", *[str(p) for p in patches])
    final = (repo / "mhc_pre_big_fuse.cu").read_text()
    assert final == (out / "mhc_pre_big_fuse.cu").read_text()
    champion = accepted[-1]
    assert final == resolved_kernel(FAM, Genome(champion.genome))
    log = run("log", "--format=%B").stdout
    assert "Kernel speedup" in log and "Correctness" in log and "simulated from recorded H200" in log
    subjects = run("log", "--format=%s").stdout.splitlines()
    assert len(subjects) == len(series) + 1 and subjects[-1] == "baseline"


def _knobs_at(text: str) -> dict[str, str]:
    """The knob values an exported kernel states in its header (``#define EVO_X 1  // x = value``)."""
    return dict(re.findall(r"^#define EVO_\w+ \S+  // (\w+) = (.+)$", text, re.M))


def test_export_of_a_recorded_campaign_has_no_step_undoing_another(tmp_path, monkeypatch):
    """The recorded campaign moves barrier late->early, then early->late, and unroll 1->2, then 2->1: each such pair
    goes into one patch, the series still applies, and every commit's message gives its steps and true figures."""
    from evo.config import load_config
    from evo.loop.campaign import Campaign

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    cfg = load_config(_campaign(tmp_path, 15))
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    attempts = camp.ledger.attempts()
    accepted = [a for a in attempts if a.verdict.status == "accepted"]
    chain = [attempts[0], *accepted]
    flips = [  # (step, knob): a step setting a knob back to its value before an earlier step changed it
        (j, k)
        for j in range(2, len(chain))
        for i in range(1, j)
        for k in chain[j].genome
        if chain[i - 1].genome[k] != chain[i].genome[k]
        and chain[j - 1].genome[k] != chain[j].genome[k] == chain[i - 1].genome[k]
    ]
    assert flips, "the recorded campaign should have a step that undoes an earlier one in 15 attempts"
    notes: list[str] = []
    out = tmp_path / "export"
    patches = export(FAM, attempts, camp.ledger.all_meta(), out, notes=notes)
    assert 0 < len(patches) < len(accepted) and any("are one patch" in n and "undid" in n for n in notes)
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env |= {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path)}
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, text=True, env=env)  # noqa: E731
    run("init", "-q")
    (repo / "mhc_pre_big_fuse.cu").write_text((out / "baseline-mhc_pre_big_fuse.cu").read_text())
    run("add", ".")
    run("commit", "-q", "-m", "baseline")
    run("am", *[str(p) for p in patches])
    assert (repo / "mhc_pre_big_fuse.cu").read_text() == (out / "mhc_pre_big_fuse.cu").read_text()
    # the knob values at each commit, oldest first, read from the files git has: no change is ever undone
    shas = run("rev-list", "--reverse", "HEAD").stdout.split()
    states = [_knobs_at(run("show", f"{c}:mhc_pre_big_fuse.cu").stdout) for c in shas]
    assert states[-1] == {k: str(v) for k, v in accepted[-1].genome.items()}
    for j in range(1, len(states)):
        for i in range(1, j):
            for k in states[j]:
                changed_i = states[i - 1][k] != states[i][k]
                changed_j = states[j - 1][k] != states[j][k]
                assert not (changed_i and changed_j and states[j][k] == states[i - 1][k]), (k, i, j)
    squashed = next(p.read_text() for p in patches if "squashed into one lasting change" in p.read_text())
    last = max(a.id for a in accepted if f"#{a.id} (" in squashed)
    cum = next(a for a in accepted if a.id == last).speedup_vs_baseline["T4096_H4096"]
    assert f"cumulative {cum.fmt()}" in squashed and "ratio of the cumulative medians" in squashed


def test_export_check_builds_the_final_file(tmp_path, monkeypatch):
    """`evo export --check`: the final file must give the champion's machine code; a changed file fails."""
    from evo.cli import main

    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    cfg = _campaign(tmp_path, 25)
    assert main(["run", str(cfg), "--plain"]) == 0
    out = tmp_path / "export"
    assert main(["export", str(cfg), "-o", str(out), "--check"]) == 0
    final = out / "mhc_pre_big_fuse.cu"
    text = final.read_text()
    assert "__syncthreads();  // only pre" in text
    final.write_text(text.replace("__syncthreads();  // only pre", "// only pre"))  # a missing barrier
    from evo.config import load_config
    from evo.ledger.ledger import Ledger
    from evo.report.export import check_final

    c = load_config(cfg)
    led = Ledger(c.storage, c.campaign, c.family.knobs)
    ok, lines = check_final(c, led.attempts(), led.all_meta(), final, "recorded")
    assert not ok and "DIFFERS" in lines[0]
    final.write_text(text + "\nthis is not C++\n")
    ok, lines = check_final(c, led.attempts(), led.all_meta(), final, "recorded")
    assert not ok and "does not build" in lines[0]


FP4 = load_family("fp4_matvec")
FP4_SPECS = [{"in": 7168, "x_bf16": False}, {"in": 4096, "x_bf16": False}, {"in": 7168, "x_bf16": True}]


@pytest.mark.parametrize(
    "changes",
    [
        {"expand": "mma", "qload": "cp_async", "row_groups": 4, "rows_per_block": 32, "warps": 8},  # EVO_MINB
        {"expand": "mma", "qload": "tma", "rows_per_block": 16, "warps": 8},  # EVO_TMA_KB, EVO_TMA_PITCH by `in`
    ],
)
def test_macros_a_family_derives_from_the_geometry_stay_undecided(changes):
    """fp4_matvec derives macros from the geometry's `in` (the H200 export of 2026-12-02 failed on them with a
    KeyError): one value at every geometry is written as a #define, differing ones stay as kernel.cu has them, and
    the exported kernel gives each specialization's machine code."""
    from evo.report.export import geometry_defines

    g = FP4.baseline().replace(**changes)
    text = resolved_kernel(FP4, g, None, FP4_SPECS)
    per = geometry_defines(FP4, g, FP4_SPECS)
    for name in per:
        assert f"// {name}: set per geometry" in text
    for spec in FP4_SPECS:
        ref, _, _ = compile_source(resolve_source(FP4, g, spec), FP4.entry, "sm_90")
        defs = "".join(f"#define EVO_{k.upper()} {int(v)}\n" for k, v in spec.items())
        label = ", ".join(f"{k}={v}" for k, v in spec.items())
        defs += "".join(f"#define {n} {dict(vals)[label]}\n" for n, vals in per.items())
        mine, _, _ = compile_source(defs + text, FP4.entry, "sm_90")
        assert sass_digest(mine) == sass_digest(ref), spec
    # no specializations given (the outside proposer's request): no KeyError, the derived macros stay undecided
    assert "#define EVO_QLOAD" in resolved_kernel(FP4, g)
