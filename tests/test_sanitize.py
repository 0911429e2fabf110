"""The sanitizer pass (evo/measure/sanitize.py) against a fake compute-sanitizer: parsing, statuses, time limit, hook,
log."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from evo.cli import main
from evo.cli.campaign import _sanitize_after_run
from evo.config import ConfigError, load_config
from evo.ledger.ledger import Ledger
from evo.measure import sanitize as sz
from evo.report.logmd import render_log

ROOT = Path(__file__).resolve().parent.parent

# A stand-in for compute-sanitizer: FAKE_MODE says what it prints; every call is logged to FAKE_LOG.
FAKE = r"""#!{python}
import json, os, subprocess, sys, time
argv = sys.argv[1:]
if argv == ["--version"]:
    print("NVIDIA (R) Compute Sanitizer\nCopyright (c) 2020-2099 NVIDIA Corporation\nVersion 2099.1.0.0 (build 1)")
    sys.exit(0)
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\n")
assert argv[0] == "--tool", argv
tool, target = argv[1], argv[2:]
while target and target[0].startswith("--"):  # options before the target (--kernel-name kns=...)
    target = target[2:]
mode = os.environ["FAKE_MODE"]
P = "========= "
print(P + "COMPUTE-SANITIZER")
if mode == "clean":
    print("evo-sanitize-target: done")
    print(P + ("RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" if tool == "racecheck"
               else "ERROR SUMMARY: 0 errors"))
elif mode == "errors":
    if tool == "racecheck":
        print(P + "Error: Race reported between Write access at fused+0x1f0 in kernel.cu:212")
        print(P + "    and Read access at fused+0x2a0 in kernel.cu:230 [4096 hazards]")
        print(P + "Warning: Race reported between Read access at fused+0x10 and Write access at fused+0x20")
        print(P + "RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)")
    else:
        for n in range(7):
            print(P + f"Invalid __global__ write of size 2 bytes")
            print(P + f"    at fused+0x{{n}}90 in kernel.cu:{{100 + n}}")
            print(P + "    by thread (255,0,0) in block (4095,0,0)")
            print(P + "    Address 0x7f0000001000 is out of bounds")
            print(P)
        print(P + "Program hit cudaErrorLaunchFailure (error 719) on CUDA API call to cudaDeviceSynchronize.")
        print("evo-sanitize-target: the launch failed: unspecified launch failure")
        print(P + "ERROR SUMMARY: 8 errors")
        sys.exit(5)
elif mode == "device":
    print(P + "Error: Device not supported. Please refer to the compute-sanitizer documentation.")
    print(P + "ERROR SUMMARY: 0 errors")
    sys.exit(1)
elif mode == "sleep":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(os.environ["FAKE_CHILD"], "w") as f:
        f.write(str(child.pid))
    print("started", flush=True)
    time.sleep(120)
elif mode == "nosummary":
    print("Unable to find injection library libsanitizer-collection.so")
    sys.exit(1)
elif mode == "target_failed":
    print("evo-sanitize-target: cannot set up: ConfigError: family: unknown family 'x'")
    print(P + "ERROR SUMMARY: 0 errors")
    sys.exit(4)
elif mode == "meet":  # each tool waits (up to 30 s) until every tool named in FAKE_MEET has started
    d = os.environ["FAKE_DIR"]
    open(os.path.join(d, "started-" + tool), "w").close()
    deadline = time.time() + 30
    while not all(os.path.exists(os.path.join(d, "started-" + t)) for t in os.environ["FAKE_MEET"].split(",")):
        if time.time() > deadline:
            print("never met"); sys.exit(9)
        time.sleep(0.05)
    print("evo-sanitize-target: done")
    print(P + ("RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" if tool == "racecheck"
               else "ERROR SUMMARY: 0 errors"))
elif mode == "launched":  # a target that says which kernel it launched
    print("evo-sanitize-target: launched _Z9other_kernILi4EEvPf at G: grid (1,), block (32,), 0 B shared")
    print(P + "ERROR SUMMARY: 0 errors")
elif mode == "exec":  # run the real target, as compute-sanitizer would
    r = subprocess.run(target, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout, end="")
    print(P + "ERROR SUMMARY: 0 errors")
    sys.exit(r.returncode)
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """EVO_SANITIZER -> the fake; returns a function setting its mode, and the list of calls made."""
    exe = tmp_path / "bin" / "compute-sanitizer"
    exe.parent.mkdir()
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    log = tmp_path / "fake-calls.jsonl"
    monkeypatch.setenv("EVO_SANITIZER", str(exe))
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_CHILD", str(tmp_path / "child.pid"))

    def mode(m: str) -> None:
        monkeypatch.setenv("FAKE_MODE", m)

    mode.calls = lambda: [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    mode.exe = exe
    return mode


def write_config(tmp_path: Path, extra: str = "", name: str = "c") -> Path:
    p = tmp_path / f"{name}.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        "campaign: t\nfamily: mhc_pre_big_fuse\n"
        "geometries:\n  - {name: T4096_H4096, T: 4096, H: 4096, S: 1, weight: 1}\n"
        "  - {name: T1_H4096_S32, T: 1, H: 4096, S: 32, weight: 0}\n"
        f"budget: {{attempts: 3}}\nstorage: sqlite:///{tmp_path / 'logs' / 'ledger.db'}\n"
        "proposer: {name: evolutionary}\n" + extra  # the campaign these tests read: its champion is #1
    )
    return p


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A recorded campaign of 3 attempts whose champion (#1) is not the baseline: its config and ledger file."""
    d = tmp_path_factory.mktemp("campaign")
    cfg = write_config(d)
    with pytest.MonkeyPatch.context() as mp:  # the autouse cache fixture is not set up yet for this scope
        mp.setenv("EVO_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cubin-cache"))
        assert main(["run", str(cfg), "--plain"]) == 0
    return cfg, d / "logs" / "ledger.db"


@pytest.fixture
def camp(campaign, tmp_path):
    """A fresh copy of the campaign's ledger, and its config (loaded) pointing at the copy."""
    cfg_path, db = campaign
    copy = tmp_path / "logs" / "ledger.db"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(db.read_bytes())
    p = write_config(tmp_path)
    cfg = load_config(p)
    led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)
    assert led.champion().id == 1 and led.meta("baseline_id") == 0
    return cfg, led


# ---------------------------------------------------------------------------
# parsing


MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at fused+0x1a0 in /tmp/kernel.cu:88
=========     by thread (3,0,0) in block (0,0,0)
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure"
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 2 errors
"""


def test_parse_memcheck_counts_and_first_lines():
    p = sz.parse_output("memcheck", MEMCHECK)
    assert p.count == 2 and p.warnings is None
    assert p.errors == [
        "Invalid __global__ read of size 16 bytes (at fused+0x1a0 in /tmp/kernel.cu:88)",
        'Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure"',
    ]
    assert sz.parse_output("memcheck", "========= ERROR SUMMARY: 1 error\n").count == 1
    assert sz.parse_output("memcheck", "========= ERROR SUMMARY: 0 errors\n") == sz.Parsed(0, None, [])
    assert sz.parse_output("memcheck", "no summary here\n").count is None
    # the last summary counts (a target that prints its own text first must not fool it)
    assert sz.parse_output("memcheck", "ERROR SUMMARY: 9 errors\n========= ERROR SUMMARY: 3 errors\n").count == 3


def test_parse_racecheck_counts_errors_not_warnings():
    text = (
        "========= Error: Race reported between Write access at k+0x10 and Read access at k+0x20\n"
        "========= Warning: Race reported between Read access at k+0x30 and Write access at k+0x40\n"
        "========= RACECHECK SUMMARY: 5 hazards displayed (3 errors, 2 warnings)\n"
        "========= ERROR SUMMARY: 5 errors\n"
    )
    p = sz.parse_output("racecheck", text)
    assert (p.count, p.warnings) == (3, 2)
    assert p.errors[0].startswith("Error: Race reported between Write access") and p.errors[1].startswith("Warning")
    one = sz.parse_output("racecheck", "========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n")
    assert (one.count, one.warnings) == (0, 1)
    # racecheck without its own summary falls back to the error summary
    assert sz.parse_output("racecheck", "========= ERROR SUMMARY: 0 errors\n").count == 0


def test_at_most_five_error_lines():
    text = "".join(f"========= Invalid __global__ write of size 4 bytes #{i}\n" for i in range(9))
    assert len(sz.parse_output("memcheck", text + "========= ERROR SUMMARY: 9 errors\n").errors) == 5


def test_judge_statuses():
    j = lambda text, rc=0, tool="memcheck": sz.judge(tool, text, rc, False, 300)[0]  # noqa: E731
    assert j("========= ERROR SUMMARY: 0 errors\n") == sz.CLEAN
    assert j(MEMCHECK, 5) == sz.ERRORS
    assert j("========= Error: Device not supported\n========= ERROR SUMMARY: 0 errors\n", 1) == sz.UNAVAILABLE
    assert j("evo-sanitize-target: no CUDA GPU visible\n========= ERROR SUMMARY: 0 errors\n", 3) == sz.UNAVAILABLE
    assert j("evo-sanitize-target: cannot set up\n========= ERROR SUMMARY: 0 errors\n", 4) == sz.FAILED
    assert j("garbage\n", 1) == sz.FAILED
    assert j("========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n", 0, "racecheck") == sz.CLEAN
    assert sz.judge("memcheck", "========= ERROR SUMMARY: 0 errors\n", None, True, 7)[0] == sz.TIMEOUT


# ---------------------------------------------------------------------------
# running the fake


def _pass(tmp_path: Path, tools=("memcheck", "racecheck"), timeout_s: float = 60) -> dict[str, sz.ToolResult]:
    gf = sz.write_genome_file(tmp_path / "g.json", "mhc_pre_big_fuse", {"block": 256})
    return sz.run_pass(write_config(tmp_path), gf, tools, timeout_s)


def test_clean(fake, tmp_path):
    fake("clean")
    res = _pass(tmp_path)
    assert list(res) == ["memcheck", "racecheck"]
    for tool, r in res.items():
        assert (r.status, r.count, r.errors, r.reason, r.exit_code) == ("clean", 0, [], "", 0), r
        assert r.version == "2099.1.0.0"
        assert r.argv[:3] == [str(fake.exe), "--tool", tool]
        assert r.argv[3:6] == [sys.executable, "-m", "evo.sanitize_target"] and r.argv[-1].endswith("g.json")
        assert 0 < r.duration_s < 60
    assert [c[:2] for c in fake.calls()] == [["--tool", "memcheck"], ["--tool", "racecheck"]]


def test_errors(fake, tmp_path):
    fake("errors")
    res = _pass(tmp_path)
    m, r = res["memcheck"], res["racecheck"]
    assert (m.status, m.count, m.exit_code) == ("errors", 8, 5)
    assert len(m.errors) == 5
    assert m.errors[0] == "Invalid __global__ write of size 2 bytes (at fused+0x090 in kernel.cu:100)"
    assert "memcheck reported 8 error(s)" in m.reason
    assert (r.status, r.count, r.warnings) == ("errors", 2, 1)
    assert r.errors[0] == "Error: Race reported between Write access at fused+0x1f0 in kernel.cu:212"


@pytest.mark.parametrize(
    "mode,status,why",
    [
        ("device", "unavailable", "Device not supported"),
        ("nosummary", "failed", "no memcheck summary"),
        ("target_failed", "failed", "cannot set up: ConfigError"),
    ],
)
def test_other_statuses(fake, tmp_path, mode, status, why):
    fake(mode)
    r = _pass(tmp_path, ("memcheck",))["memcheck"]
    assert r.status == status and why in r.reason, r


def _assert_gone(tmp_path: Path, why: str) -> None:
    """The fake's child (pid in child.pid) is gone or a zombie within 10 s (init reaps the orphan)."""
    pid = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.1)
    pytest.fail(why.format(pid=pid))


def test_timeout_kills_the_sanitizer_and_what_it_started(fake, tmp_path):
    fake("sleep")
    r = _pass(tmp_path, ("memcheck",), timeout_s=2)["memcheck"]
    assert r.status == "timeout" and "2 s" in r.reason and r.count is None
    assert r.duration_s >= 2  # it waited out the limit it was given
    _assert_gone(tmp_path, "the target's process {pid} outlived the time limit")


def test_parallel_tools_run_at_the_same_time(fake, tmp_path, monkeypatch):
    """sanitizer.parallel: both tools are running at once (each fake waits for the other to start); one after the
    other, the first waits in vain and hits its time limit."""
    fake("meet")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_MEET", "memcheck,racecheck")
    gf = sz.write_genome_file(tmp_path / "g.json", "mhc_pre_big_fuse", {"block": 256})
    opts = ["--kernel-name", "kns=mhc_pre_big_fuse"]
    res = sz.run_pass(write_config(tmp_path), gf, ("memcheck", "racecheck"), 60, options=opts, parallel=True)
    assert list(res) == ["memcheck", "racecheck"]  # the configured order, whichever ended first
    assert {t: r.status for t, r in res.items()} == {"memcheck": "clean", "racecheck": "clean"}
    assert all(r.argv[3:5] == opts for r in res.values())
    for f in tmp_path.glob("started-*"):
        f.unlink()
    seq = sz.run_pass(write_config(tmp_path), gf, ("memcheck", "racecheck"), 3)
    assert seq["memcheck"].status == "timeout"


def test_parallel_tools_each_keep_their_time_limit(fake, tmp_path, monkeypatch):
    fake("meet")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_MEET", "synccheck")  # a tool not run: both wait in vain
    gf = sz.write_genome_file(tmp_path / "g.json", "mhc_pre_big_fuse", {"block": 256})
    res = sz.run_pass(write_config(tmp_path), gf, ("memcheck", "racecheck"), 2, parallel=True)
    assert {t: r.status for t, r in res.items()} == {"memcheck": "timeout", "racecheck": "timeout"}
    assert all("did not finish within 2 s" in r.reason for r in res.values())


def test_a_kernel_filter_that_matches_no_launched_kernel_is_no_clean_result(fake, tmp_path):
    fake("launched")
    gf = sz.write_genome_file(tmp_path / "g.json", "mhc_pre_big_fuse", {"block": 256})
    r = sz.run_pass(write_config(tmp_path), gf, ("memcheck",), 60, options=["--kernel-name", "kns=mhc_pre"])
    assert (
        r["memcheck"].status == "failed" and "matches none of the kernels the target launched" in r["memcheck"].reason
    )
    r = sz.run_pass(write_config(tmp_path), gf, ("memcheck",), 60, options=["--kernel-name", "kns=other_kern"])
    assert r["memcheck"].status == "clean"


def test_kernel_options_name_the_entry_not_its_template_arguments():
    from types import SimpleNamespace as NS

    assert sz.kernel_options(NS(entry="fused_add_rmsnorm<{vec}, {block}>"), False) == [
        "--kernel-name",
        "kns=fused_add_rmsnorm",
    ]
    assert sz.kernel_options(NS(entry="mhc_pre_big_fuse"), False) == ["--kernel-name", "kns=mhc_pre_big_fuse"]
    assert sz.kernel_options(NS(entry="mhc_pre_big_fuse"), True) == []
    assert sz.kernel_options(NS(entry="ns::k<{vec}>"), False) == ["--kernel-name", "kns=k"]


def test_missing_binary_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("EVO_SANITIZER", str(tmp_path / "nope"))
    assert sz.find_sanitizer() == (None, f"EVO_SANITIZER={tmp_path / 'nope'} is not an executable file")
    res = _pass(tmp_path)
    assert {t: r.status for t, r in res.items()} == {"memcheck": "unavailable", "racecheck": "unavailable"}
    assert "is not an executable file" in res["memcheck"].reason and res["memcheck"].argv[1:3] == ["--tool", "memcheck"]
    monkeypatch.delenv("EVO_SANITIZER")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sz, "DEFAULT_PATH", str(tmp_path / "cuda" / "compute-sanitizer"))
    binary, why = sz.find_sanitizer()
    assert binary is None and "compute-sanitizer not found" in why


def test_version_of_a_binary_that_fails_is_unknown(tmp_path):
    bad = tmp_path / "cs"
    bad.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\nexit 1\n")
    bad.chmod(0o755)
    assert sz.sanitizer_version(str(bad)) is None


def test_path_lookup(fake, tmp_path, monkeypatch):
    monkeypatch.delenv("EVO_SANITIZER")
    monkeypatch.setenv("PATH", str(fake.exe.parent))
    assert sz.find_sanitizer() == (str(fake.exe), "")


def test_the_real_target_runs_under_it(fake, tmp_path):
    """The fake runs the real target: it builds the genome; here without a GPU it must say so (unavailable)."""
    from harness.gpu import gpu_available

    fake("exec")
    cfg = write_config(tmp_path)
    base = dict(load_config(cfg).family.baseline())
    gf = sz.write_genome_file(tmp_path / "g.json", "mhc_pre_big_fuse", {**base, "block": 512})
    r = sz.run_pass(cfg, gf, ("memcheck",), 120)["memcheck"]
    if gpu_available():
        assert r.status == "clean", r
    else:
        assert r.status == "unavailable" and "no CUDA GPU visible" in r.reason, r
    bad = sz.write_genome_file(tmp_path / "bad.json", "moe_q2_matvec", base)
    r = sz.run_pass(cfg, bad, ("memcheck",), 120)["memcheck"]
    assert r.status == "failed" and "cannot set up" in r.reason, r


# ---------------------------------------------------------------------------
# config


def test_config_defaults_and_values(tmp_path):
    s = load_config(write_config(tmp_path)).sanitizer
    assert (s.enabled, s.tools, s.timeout_s) == ("auto", ("memcheck", "racecheck"), 300.0)
    s = load_config(write_config(tmp_path, "sanitizer: {enabled: off, tools: [racecheck], timeout_s: 20}\n")).sanitizer
    assert (s.enabled, s.tools, s.timeout_s) == ("off", ("racecheck",), 20.0)
    assert load_config(write_config(tmp_path, "sanitizer: {enabled: on}\n")).sanitizer.enabled == "on"
    assert load_config(write_config(tmp_path, "sanitizer: {enabled: auto}\n")).sanitizer.enabled == "auto"


@pytest.mark.parametrize(
    "text,expect",
    [
        ("sanitizer: {enabled: maybe}", "sanitizer.enabled: 'maybe' is not allowed (allowed: auto, on, off)"),
        (
            "sanitizer: {tools: [memcheck, leakcheck]}",
            "sanitizer.tools[1]: 'leakcheck' is not a tool (allowed: memcheck, racecheck, synccheck, initcheck)",
        ),
        ("sanitizer: {tools: []}", "sanitizer.tools: expected a non-empty list of tools"),
        ("sanitizer: {tools: memcheck}", "sanitizer.tools: expected a non-empty list of tools"),
        ("sanitizer: {tools: [memcheck, memcheck]}", "sanitizer.tools: a tool is listed twice"),
        ("sanitizer: {timeout_s: 0}", "sanitizer.timeout_s: 0.0 is out of range (allowed: >= 1.0 and <= 86400.0)"),
        ("sanitizer: {timeout_s: soon}", "sanitizer.timeout_s: expected a number"),
        (
            "sanitizer: {tool: [memcheck]}",
            "sanitizer.tool: unknown key (allowed here: all_kernels, enabled, parallel, timeout_s, tools)",
        ),
        ("sanitizer: [memcheck]", "sanitizer: expected a mapping"),
    ],
)
def test_config_errors(tmp_path, text, expect):
    with pytest.raises(ConfigError) as e:
        load_config(write_config(tmp_path, text + "\n"))
    assert expect in str(e.value) and "\n" not in str(e.value), str(e.value)


# ---------------------------------------------------------------------------
# the hook after `evo run`, `evo sanitize`, and the log


def _section(md: str) -> str:
    return md.split("## Sanitizer\n", 1)[1].split("\n## ", 1)[0]


def test_recorded_run_skips_it_and_the_log_says_why(campaign, capsys):
    cfg_path, db = campaign
    led = Ledger(f"sqlite:///{db}", "t", load_config(cfg_path).family.knobs)
    assert led.meta("sanitizer") is None  # nothing written for a simulated campaign
    assert main(["run", str(cfg_path), "--plain"]) == 0  # resumed: budget spent, the hook runs again
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "sanitizer" in ln)
    assert (
        line.startswith("evo: sanitizer skipped: the recorded backend runs no kernel")
        and "simulated from recorded H200 measurements" in line
    )
    sec = _section((db.parent / "attempts.md").read_text())
    assert "Sanitizer not run: the campaign ran on the recorded backend" in sec


def test_hook_runs_on_the_champion_and_records_it(fake, camp, capsys):
    cfg, led = camp
    fake("clean")
    rec = sz.after_run(cfg, led, "gpu", False, "attempt budget reached (3/3)")
    meta = led.meta("sanitizer")
    assert rec == meta and meta["attempt_id"] == 1 and meta["champion_id"] == 1 and meta["at"]
    assert meta["genome"] == led.champion().genome and meta["source_matches"] is True
    assert meta["version"] == "2099.1.0.0"
    assert {t: r["status"] for t, r in meta["tools"].items()} == {"memcheck": "clean", "racecheck": "clean"}
    gfile = Path(meta["tools"]["memcheck"]["argv"][-1])
    assert gfile == cfg.log_dir.resolve() / "sanitize" / "attempt-1.json"
    assert json.loads(gfile.read_text())["genome"] == led.champion().genome
    assert "evo: sanitizer on champion #1: memcheck clean" in capsys.readouterr().out
    n = len(fake.calls())
    assert n == 2

    # a resumed run with the same champion does not check it again
    assert sz.after_run(cfg, led, "gpu", False, "attempt budget reached (3/3)") == meta
    assert len(fake.calls()) == n and "already checked" in capsys.readouterr().out

    sec = _section(render_log(led.attempts(), led.all_meta()))
    assert "compute-sanitizer 2099.1.0.0 on attempt #1 (the champion)" in sec
    assert "- memcheck: **clean**, 0 error(s)" in sec and "- racecheck: **clean**, 0 error(s)" in sec
    assert "command: `" in sec and "--tool memcheck" in sec and "-m evo.sanitize_target" in sec
    assert "not run" not in sec


def test_hook_records_errors_and_the_log_shows_them(fake, camp):
    cfg, led = camp
    fake("errors")
    sz.after_run(cfg, led, "gpu", False, "budget")
    meta = led.meta("sanitizer")
    assert meta["tools"]["memcheck"]["status"] == "errors" and meta["tools"]["memcheck"]["count"] == 8
    assert sz.failed_tools(meta) == ["memcheck", "racecheck"]
    sec = _section(render_log(led.attempts(), led.all_meta()))
    assert "- memcheck: **errors**, 8 error(s)" in sec and "memcheck reported 8 error(s)" in sec
    assert "  - `Invalid __global__ write of size 2 bytes (at fused+0x090 in kernel.cu:100)`" in sec
    assert "- racecheck: **errors**, 2 error(s), 1 warning(s)" in sec


def test_hook_skips(fake, camp, tmp_path, monkeypatch, capsys):
    cfg, led = camp
    fake("clean")
    # interrupted: skipped, with a record saying why
    assert sz.after_run(cfg, led, "gpu", False, "interrupted by the user") is None
    assert "the run was interrupted" in led.meta("sanitizer")["skipped"]
    # enabled: off
    off = load_config(write_config(tmp_path, "sanitizer: {enabled: off}\n", name="off"))
    assert sz.after_run(off, led, "gpu", False, "budget") is None
    assert led.meta("sanitizer")["skipped"] == "sanitizer.enabled is off in the config"
    assert "Sanitizer not run: sanitizer.enabled is off in the config" in _section(
        render_log(led.attempts(), led.all_meta())
    )
    # auto without a binary: skipped; on without one: the pass runs and says unavailable
    monkeypatch.setenv("EVO_SANITIZER", str(tmp_path / "nope"))
    assert sz.after_run(cfg, led, "gpu", False, "budget") is None
    assert "is not an executable file" in led.meta("sanitizer")["skipped"]
    on = load_config(write_config(tmp_path, "sanitizer: {enabled: on}\n", name="on"))
    sz.after_run(on, led, "gpu", False, "budget")
    assert {r["status"] for r in led.meta("sanitizer")["tools"].values()} == {"unavailable"}
    sec = _section(render_log(led.attempts(), led.all_meta()))
    assert "- memcheck: **unavailable**, " in sec and "is not an executable file" in sec and "error(s)" not in sec
    assert fake.calls() == []
    # a skip never hides a pass that ran
    sz.after_run(off, led, "gpu", False, "budget")
    assert "tools" in led.meta("sanitizer")
    # the recorded backend writes nothing
    before = led.all_meta()
    sz.after_run(cfg, led, "recorded", True, "budget")
    assert led.all_meta() == before
    assert "evo: sanitizer skipped: the recorded backend" in capsys.readouterr().out


def test_hook_skips_a_baseline_champion(fake, tmp_path):
    fake("clean")
    cfg = load_config(write_config(tmp_path))
    led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)
    from evo.core.records import Attempt, Verdict

    g = cfg.family.baseline()
    t = led.ask(fixed=g)
    led.record(
        t,
        Attempt(t.number, "t", cfg.family.name, dict(g), g.key, verdict=Verdict("baseline")),
        meta={"baseline_id": t.number},
    )
    assert sz.after_run(cfg, led, "gpu", False, "budget") is None
    assert led.meta("sanitizer")["skipped"].startswith("the champion is the baseline")
    assert fake.calls() == []


def test_cli_hook_closes_the_backend_and_runs_the_pass(fake, camp, capsys):
    cfg, led = camp
    fake("clean")
    closed = []
    c = SimpleNamespace(
        cfg=cfg, ledger=led, simulated=False, backend=SimpleNamespace(name="gpu", close=lambda: closed.append(True))
    )
    _sanitize_after_run(c, SimpleNamespace(stopped="attempt budget reached (3/3)"))
    assert closed == [True]
    assert led.meta("sanitizer")["tools"]["racecheck"]["status"] == "clean"
    # a bug in the pass is reported, and the finished run still stands
    c.ledger = None
    _sanitize_after_run(c, SimpleNamespace(stopped="budget"))
    assert "evo: sanitizer pass failed: AttributeError" in capsys.readouterr().out


def test_evo_sanitize_command(fake, camp, tmp_path, capsys):
    cfg, led = camp
    path = str(cfg.path)
    fake("clean")
    assert main(["sanitize", path, "--backend", "gpu"]) == 0
    assert led.meta("sanitizer")["attempt_id"] == 1
    assert "**clean**" in _section((cfg.log_dir / "attempts.md").read_text())
    fake("errors")
    assert main(["sanitize", path, "--backend", "gpu", "--id", "0"]) == 1  # the baseline, on demand
    meta = led.meta("sanitizer")
    assert (meta["attempt_id"], meta["champion_id"]) == (0, 1)
    assert "on attempt #0 (champion then: #1)" in _section((cfg.log_dir / "attempts.md").read_text())
    capsys.readouterr()
    assert main(["sanitize", path, "--backend", "gpu", "--id", "99"]) == 2
    assert "--id 99: no such attempt" in capsys.readouterr().err
    n = len(fake.calls())
    assert main(["sanitize", path, "--backend", "recorded"]) == 3  # not checked is never clean (exit 3)
    assert len(fake.calls()) == n and "sanitizer not run (exit 3): the recorded backend" in capsys.readouterr().err
    assert main(["sanitize", str(write_config(tmp_path / "none")), "--backend", "gpu"]) == 2
    assert "has no ledger yet" in capsys.readouterr().err


def test_log_without_a_pass_says_not_run():
    sec = _section(render_log([], {}))
    assert sec.strip().startswith("Sanitizer not run: no pass recorded") and "evo sanitize" in sec


def test_a_stopped_evo_kills_the_sanitizer_it_started(fake, tmp_path):
    """Ctrl-C or SIGTERM (evo turns it into the same interrupt) mid-pass: the sanitizer's session goes too."""
    import signal

    fake("sleep")

    def stop(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            _pass(tmp_path, ("memcheck",), timeout_s=60)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    _assert_gone(tmp_path, "the sanitizer's child {pid} outlived the interrupted pass")


def test_evo_sanitize_without_compute_sanitizer_is_not_clean(camp, tmp_path, monkeypatch, capsys):
    """No compute-sanitizer here: every tool unavailable, exit 3 (could not check), never 0 (checked and clean)."""
    cfg, led = camp
    monkeypatch.setenv("EVO_SANITIZER", str(tmp_path / "no-such-sanitizer"))
    assert main(["sanitize", str(cfg.path), "--backend", "gpu"]) == 3
    assert {r["status"] for r in led.meta("sanitizer")["tools"].values()} == {"unavailable"}
