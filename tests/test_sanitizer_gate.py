"""The sanitizer gate (gates/sanitizer.py): the pure decision, the family's suppressions, and its wiring into a
campaign (a fake compute-sanitizer, EVO_SANITIZER, over a backend that says it is the GPU), the log and export."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from evo.config import load_config
from evo.core.family import SanitizerSuppression, family_problem, load_family
from evo.core.records import ACCEPTED, Code
from evo.loop.campaign import Campaign
from evo.measure import sanitize as sz
from evo.report.export import commit_message
from evo.report.logmd import render_log
from gates.sanitizer import ToolReport, describe, sanitizer_gate
from harness.recorded import RecordedBackend

ROOT = Path(__file__).resolve().parent.parent
RACE = "Error: Race reported between Write access at fp4_matvec+0x7500"
TMA = {"qload": "tma", "expand": "mma"}


def fp4():
    return load_family("fp4_matvec")


def test_clean_passes_and_is_checked():
    r = sanitizer_gate([ToolReport("memcheck", "clean", 0), ToolReport("racecheck", "clean", 0)], (), {})
    assert r.verdict.ok and r.record["checked"] and r.record["suppressed"] == []
    assert describe(r.record) == "memcheck, racecheck clean"


def test_a_finding_rejects_with_its_first_lines():
    lines = [f"Invalid __global__ write of size 4 bytes (at k+0x{i}0)" for i in range(5)]
    r = sanitizer_gate([ToolReport("memcheck", "errors", 5, lines)], fp4().sanitizer_suppressions, TMA)
    v = r.verdict
    assert (v.status, v.gate, v.code) == ("rejected", "sanitizer", Code.SANITIZER_FINDING)
    assert v.label() == "rejected: sanitizer" and v.detail["tool"] == "memcheck"
    assert v.detail["findings"] == lines[:3] and lines[0] in v.reason and lines[4] not in v.reason


def test_the_fp4_racecheck_report_is_a_declared_suppression():
    """The H200 report (R/2026-12-01-fp4-matvec-pdl-vs-plain-probe/racecheck-tma.txt) parses into one error finding
    that fp4_matvec's suppression matches for qload=tma genomes, and for no other."""
    text = (ROOT / "benchmarks/results/2026-12-01-fp4-matvec-pdl-vs-plain-probe/racecheck-tma.txt").read_text()
    tail = text.split('"unroll":4,"warps":4 in4096_out4096', 1)[1]
    p = sz.parse_output("racecheck", tail)
    assert (p.count, p.warnings) == (1, 1)
    rep = ToolReport("racecheck", "errors", p.count, p.findings)
    sup = fp4().sanitizer_suppressions
    r = sanitizer_gate([rep], sup, TMA)
    assert r.verdict.ok and r.record["checked"]
    (s,) = r.record["suppressed"]
    assert s["name"] == "tma-stage-release-after-syncwarp" and "fp4_matvec+0x76f0" in s["finding"]
    assert "__syncwarp" in s["argument"] and "docs/fp4-bandwidth.md" in s["argument"]
    assert "tma-stage-release-after-syncwarp" in describe(r.record)
    # the champion's report of 2026-12-02 (offset 0x7500) too
    assert sanitizer_gate([ToolReport("racecheck", "errors", 1, [RACE])], sup, TMA).verdict.ok
    # not for another qload, nor for memcheck, nor for a report counting more errors than it printed
    assert sanitizer_gate([rep], sup, {**TMA, "qload": "cp_async"}).verdict.code is Code.SANITIZER_FINDING
    memcheck = ToolReport("memcheck", "errors", 1, [RACE])
    assert sanitizer_gate([memcheck], sup, TMA).verdict.code is Code.SANITIZER_FINDING
    more = sanitizer_gate([ToolReport("racecheck", "errors", 3, [RACE])], sup, TMA)
    assert more.verdict.code is Code.SANITIZER_FINDING and "2 more error(s) not printed" in more.verdict.reason
    assert more.record["suppressed"] == []  # nothing claimed known on a tool that failed the gate


def test_a_tool_that_could_not_check_is_no_finding_but_says_so():
    r = sanitizer_gate(
        [ToolReport("memcheck", "clean", 0), ToolReport("racecheck", "timeout", None, [], "did not finish in 9 s")],
        (),
        {},
    )
    assert r.verdict.ok and not r.record["checked"]
    assert describe(r.record) == "memcheck clean; not sanitizer-checked (racecheck: did not finish in 9 s)"
    assert describe(None).startswith("not sanitizer-checked")
    assert not sanitizer_gate([], (), {}).record["checked"]


@pytest.mark.parametrize(
    "kw,expect",
    [
        ({"tool": "leakcheck"}, "tool 'leakcheck'"),
        ({"pattern": "("}, "is not a regular expression"),
        ({"pattern": ""}, "pattern is empty"),
        ({"argument": " "}, "no argument"),
        ({"when": {"nope": 1}}, "when names 'nope', not a knob"),
    ],
)
def test_a_bad_suppression_is_refused_as_the_family_loads(kw, expect):
    fam = fp4()
    good = dict(name="x", tool="racecheck", kernel="fp4_matvec", pattern="Race", argument="why")
    fam.sanitizer_suppressions = (SanitizerSuppression(**{**good, **kw}),)
    assert expect in (family_problem(fam) or "")
    fam.sanitizer_suppressions = (SanitizerSuppression(**good), SanitizerSuppression(**good))
    assert family_problem(fam) == "sanitizer suppression x is declared twice"


# ---------------------------------------------------------------------------
# wiring: a campaign whose backend says it is the GPU, compute-sanitizer faked

FAKE = r"""#!{python}
import os, sys
if sys.argv[1:] == ["--version"]:
    print("Version 2099.1.0.0"); sys.exit(0)
tool = sys.argv[2]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(tool + " " + " ".join(sys.argv[3:]) + "\n")
P = "========= "
if os.environ["FAKE_MODE"] == "race" and tool == "racecheck":
    print(P + "Error: Race reported between Write access at fused+0x1f0 in kernel.cu:212")
    print(P + "    and Read access at fused+0x2a0 in kernel.cu:230 [4096 hazards]")
    print(P + "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)")
    sys.exit(0)
print("evo-sanitize-target: done")
race = "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
print(P + (race if tool == "racecheck" else "ERROR SUMMARY: 0 errors"))
"""


class OnTheGpu(RecordedBackend):
    """The recorded sweep, but not simulated: the campaign runs the gates a GPU campaign runs."""

    name = "gpu"
    simulated = False

    def latency_floor(self, grids, rounds=12, pdl=False):
        return {g: {"us": 2.0, "launches": 2000, "grid": s["grid"], "block": s["block"]} for g, s in grids.items()}


def _config(tmp_path: Path, attempts: int, extra: str = "") -> Path:
    text = (ROOT / "configs" / "mhc_pre_big_fuse.yaml").read_text()
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, flags=re.M)
    text = re.sub(r"^backend: .*\n", "", text, flags=re.M)
    text = re.sub(r"^(sanitizer|worker): .*\n", "", text, flags=re.M)
    p = tmp_path / "c.yaml"
    p.write_text(text + f"storage: sqlite:///{tmp_path / 'ledger.db'}\nworker: {{prefetch: 0}}\n" + extra)
    return p


def _run(tmp_path: Path, monkeypatch, mode: str | None, attempts: int = 4, extra: str = ""):
    if mode is None:
        monkeypatch.setenv("EVO_SANITIZER", str(tmp_path / "none"))
    else:
        exe = tmp_path / "compute-sanitizer"
        exe.write_text(FAKE.replace("{python}", sys.executable))
        exe.chmod(0o755)
        monkeypatch.setenv("EVO_SANITIZER", str(exe))
        monkeypatch.setenv("FAKE_MODE", mode)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.txt"))
    cfg = load_config(_config(tmp_path, attempts, extra))
    backend = OnTheGpu(cfg.family, cfg.geometries)
    camp = Campaign(cfg, out=lambda s: None, command="pytest", backend=backend)
    camp.run()
    calls = (tmp_path / "calls.txt").read_text().splitlines() if (tmp_path / "calls.txt").exists() else []
    return camp, camp.ledger.attempts(), calls


def test_a_finding_keeps_a_step_from_becoming_the_champion(tmp_path, monkeypatch):
    camp, atts, calls = _run(tmp_path, monkeypatch, "race")
    rejected = [a for a in atts if a.verdict.code is Code.SANITIZER_FINDING]
    assert rejected, [a.verdict.reason for a in atts]  # #2 won on perf (tests/test_campaign's run) and was refused
    assert not [a for a in atts if a.verdict.status == ACCEPTED]
    assert camp.ledger.champion().id == 0
    r = rejected[0]
    assert r.verdict.label() == "rejected: sanitizer" and "fused+0x1f0" in r.verdict.reason
    assert r.timings and r.speedup_vs_parent  # the perf evidence stays with the record
    # each tool ran once per step (both at once: sanitizer.parallel), on the step's own genome file, instrumenting
    # only the family's kernel (sanitizer.all_kernels false)
    for a in rejected:
        mine = [c for c in calls if c.endswith(f"step-{a.id}.json")]
        assert sorted(c.split()[0] for c in mine) == ["memcheck", "racecheck"]
        assert all("--kernel-name kns=mhc_pre_big_fuse " in c for c in mine)
    assert len(calls) == 2 * len(rejected)


def test_a_clean_step_carries_its_result_into_the_log_and_commit_message(tmp_path, monkeypatch):
    camp, atts, calls = _run(tmp_path, monkeypatch, "clean")
    acc = [a for a in atts if a.verdict.status == ACCEPTED]
    assert acc and all(a.verdict.detail["sanitizer"]["checked"] for a in acc)
    meta = camp.ledger.all_meta()
    md = render_log(atts, meta)
    assert "| memcheck, racecheck: clean |" in md  # (its cell, before "Output vs baseline")
    assert "Latency floor: T4096_H4096 2.00 µs" in md and "x latency floor)" in md
    base = atts[0]
    msg = commit_message(camp.family, 1, acc[0], base, meta)
    assert "Sanitizer: memcheck, racecheck clean." in msg
    # the after-run pass sees the gate checked the champion and does not run the tools again
    n = len(calls)
    out: list[str] = []
    assert sz.after_run(camp.cfg, camp.ledger, "gpu", False, "budget", out=out.append) is None
    assert "checked by the sanitizer gate as it was accepted" in out[0]
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == n


def test_without_the_tool_every_step_says_not_sanitizer_checked(tmp_path, monkeypatch):
    camp, atts, calls = _run(tmp_path, monkeypatch, None)
    acc = [a for a in atts if a.verdict.status == ACCEPTED]
    assert acc and calls == []
    rec = acc[0].verdict.detail["sanitizer"]
    assert not rec["checked"] and "is not an executable file" in rec["unchecked"][""]
    md = render_log(atts, camp.ledger.all_meta())
    assert "| not sanitizer-checked (EVO_SANITIZER=" in md
    msg = commit_message(camp.family, 1, acc[0], atts[0], camp.ledger.all_meta())
    assert "Sanitizer: not sanitizer-checked (EVO_SANITIZER=" in msg


def test_a_suppressed_finding_is_printed_in_the_step_table_and_commit_message(tmp_path, monkeypatch):
    camp, atts, _ = _run(tmp_path, monkeypatch, None)
    a = next(x for x in atts if x.verdict.status == ACCEPTED)
    from evo.core.records import Verdict

    rec = sanitizer_gate([ToolReport("racecheck", "errors", 1, [RACE])], fp4().sanitizer_suppressions, TMA).record
    a.verdict = Verdict.accepted(a.verdict.reason, {"sanitizer": rec})
    md = render_log([atts[0], a], camp.ledger.all_meta())
    assert "racecheck: clean but for known tma-stage-release-after-syncwarp (racecheck)" in md
    assert f"tma-stage-release-after-syncwarp (racecheck): `{RACE}`" in md and "__syncwarp" in md
    msg = commit_message(camp.family, 1, a, atts[0], camp.ledger.all_meta())
    flat = " ".join(msg.split())
    assert f"findings the family declares known: tma-stage-release-after-syncwarp (racecheck): {RACE}" in flat
    assert "Known finding tma-stage-release-after-syncwarp: qload=tma:" in flat


def test_the_recorded_backend_is_not_sanitizer_checked(tmp_path):
    cfg = load_config(_config(tmp_path, 4, "backend: recorded\n"))
    camp = Campaign(cfg, out=lambda s: None, command="pytest")
    camp.run()
    atts = camp.ledger.attempts()
    acc = [a for a in atts if a.verdict.status == ACCEPTED]
    assert acc and "recorded backend" in acc[0].verdict.detail["sanitizer"]["unchecked"][""]
    md = render_log(atts, camp.ledger.all_meta())
    assert "Latency floor: not measured (recorded backend)" in md
    assert "not sanitizer-checked (the recorded backend" in md
    assert camp.ledger.meta("latency_floor") is None  # nothing invented
