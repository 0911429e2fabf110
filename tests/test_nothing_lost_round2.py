"""Nothing lost, round two (issue 45): the cases a hostile user found, outside the ledger's own records.

Each test reproduces one class on the code before the fix: a user's file overwritten or deleted, a stop request
not honoured, a family's code that exits or crashes passing silently, unbounded input read to the end, and the
smaller messages. The CLI's behaviour is tested through `evo` as a subprocess, as a user meets it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evo.core.family import load_family
from evo.search.ideas import make_patch

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"
FAM = load_family("mhc_pre_big_fuse")
SRC = FAM.source()
ANCHOR = "  for (int hb = h0 + tid * VEC_ELEMS; hb < h1; hb += stride * EVO_UNROLL) {\n"


def evo(
    *args: str, cwd: Path = ROOT, timeout: float = 300, env: dict | None = None, memory: int | None = None
) -> subprocess.CompletedProcess:
    """``evo ARGS`` as a subprocess; ``memory``: the most bytes of address space it may take (a command that reads
    without bound then fails alone, not the machine)."""
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}

    def limit() -> None:
        import resource

        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "evo", *args],
        cwd=cwd,
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
    )


def one_line(r: subprocess.CompletedProcess, expect: str, rc: int | None = None) -> str:
    """The command failed with one line on stderr naming ``expect`` and no traceback."""
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out[-3000:]
    assert r.returncode != 0 if rc is None else r.returncode == rc, (r.returncode, out[-3000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and expect in lines[0], r.stderr[-3000:]
    return lines[0]


# ---------------------------------------------------------------------------
# 1. `evo idea add` never overwrites the user's file


@pytest.fixture
def candidates(tmp_path):
    root = tmp_path / "candidates"
    shutil.copytree(FAM.folder, root / FAM.name, ignore=shutil.ignore_patterns("ideas", "__pycache__"))
    return root


def _good_patch(tmp_path: Path, name: str = "cols.patch", line: str = "#pragma unroll\n") -> Path:
    assert SRC.count(ANCHOR) == 1
    p = tmp_path / name
    p.write_text(
        "Title: Unroll the stream loop\nRationale: registers\n\n" + make_patch(SRC, SRC.replace(ANCHOR, line + ANCHOR))
    )
    return p


def test_idea_add_never_overwrites_a_draft_or_a_symlink(tmp_path, candidates):
    good = _good_patch(tmp_path)
    ideas = candidates / FAM.name / "ideas"
    ideas.mkdir()
    draft = ideas / "cols.patch"
    draft.write_text("Title: my half-written idea\nRationale: tomorrow\n\n--- a/kernel.cu\n")  # does not parse
    precious = tmp_path / "precious.patch"
    precious.write_text("the user's own file\n")
    (ideas / "linked.patch").symlink_to(precious)
    (ideas / "dangling.patch").symlink_to(tmp_path / "nowhere.patch")

    one_line(
        evo("idea", "add", FAM.name, str(good), "--name", "cols", "--candidates", str(candidates)), "cols.patch exists"
    )
    assert draft.read_text().startswith("Title: my half-written idea")
    for name in ("linked", "dangling"):
        one_line(evo("idea", "add", FAM.name, str(good), "--name", name, "--candidates", str(candidates)), "symlink")
        assert (ideas / f"{name}.patch").is_symlink()
    assert precious.read_text() == "the user's own file\n" and not (tmp_path / "nowhere.patch").exists()

    # --force replaces only what evo wrote: never the user's draft, never through (or over) a symlink
    for name, why in (("cols", "not written by evo"), ("linked", "symlink"), ("dangling", "symlink")):
        one_line(
            evo("idea", "add", FAM.name, str(good), "--name", name, "--force", "--candidates", str(candidates)), why
        )
    assert draft.read_text().startswith("Title: my half-written idea")
    assert (ideas / "linked.patch").is_symlink() and precious.read_text() == "the user's own file\n"
    assert not (tmp_path / "nowhere.patch").exists()


def test_idea_add_force_replaces_what_evo_wrote_and_nothing_edited_since(tmp_path, candidates):
    ideas = candidates / FAM.name / "ideas"
    r = evo("idea", "add", FAM.name, str(_good_patch(tmp_path)), "--name", "mine", "--candidates", str(candidates))
    assert r.returncode == 0, r.stderr
    other = _good_patch(tmp_path, "other.patch", "#pragma unroll 2\n")
    one_line(evo("idea", "add", FAM.name, str(other), "--name", "mine", "--candidates", str(candidates)), "exists")
    r = evo("idea", "add", FAM.name, str(other), "--name", "mine", "--force", "--candidates", str(candidates))
    assert r.returncode == 0, r.stderr
    assert "#pragma unroll 2" in (ideas / "mine.patch").read_text()
    # the user edits evo's file: from then on it is theirs
    (ideas / "mine.patch").write_text((ideas / "mine.patch").read_text().replace("Title: ", "Title: edited "))
    one_line(
        evo(
            "idea",
            "add",
            FAM.name,
            str(_good_patch(tmp_path)),
            "--name",
            "mine",
            "--force",
            "--candidates",
            str(candidates),
        ),
        "changed since evo wrote it",
    )
    assert "Title: edited" in (ideas / "mine.patch").read_text()


# ---------------------------------------------------------------------------
# 8. `evo export --force` trusts only digests it recorded, and never writes through a symlink


def recorded_config(folder: Path, attempts: int = 6, extra: str = "") -> Path:
    """The shipped config on the recorded backend (CPU), its ledger under ``folder``."""
    text = SHIPPED.read_text().replace("backend: auto", "backend: recorded")
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, flags=re.M)
    text = re.sub(r"^peer: .*$", "peer: {torch_compile: 'off'}", text, flags=re.M)
    cfg = folder / "c.yaml"
    cfg.write_text(text + f"\nstorage: sqlite:///{folder / 'ledger.db'}\n" + extra)
    return cfg


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A recorded campaign and an export of it: (config, export folder)."""
    home = tmp_path_factory.mktemp("r2-export")
    cfg = recorded_config(home)
    r = evo("run", str(cfg), "--plain", cwd=home)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = evo("export", str(cfg), "-o", str(home / "ex"), cwd=home)
    assert r.returncode == 0, r.stderr
    return cfg, home / "ex"


def _manifest(out: Path) -> dict:
    import json

    return json.loads((out / ".evo-export.json").read_text())


def _set_manifest(out: Path, files: dict) -> None:
    import json

    m = _manifest(out)
    m["files"].update(files)
    (out / ".evo-export.json").write_text(json.dumps(m))


def test_export_force_never_deletes_a_file_the_manifest_names_without_a_digest(exported, tmp_path):
    cfg, first = exported
    out = tmp_path / "ex"
    shutil.copytree(first, out)
    (out / "notes.txt").write_text("the user's notes\n")
    _set_manifest(out, {"notes.txt": ""})
    one_line(evo("export", str(cfg), "-o", str(out), "--force", cwd=tmp_path), "notes.txt has no digest")
    assert (out / "notes.txt").read_text() == "the user's notes\n"


def test_export_force_never_writes_through_a_symlink(exported, tmp_path):
    import hashlib

    cfg, first = exported
    out = tmp_path / "ex"
    shutil.copytree(first, out)
    secret = tmp_path / "secret.cu"
    secret.write_text("// the user's kernel, outside the export folder\n")
    (out / "mhc_pre_big_fuse.cu").unlink()
    (out / "mhc_pre_big_fuse.cu").symlink_to(secret)
    _set_manifest(out, {"mhc_pre_big_fuse.cu": hashlib.sha256(secret.read_bytes()).hexdigest()})
    one_line(evo("export", str(cfg), "-o", str(out), "--force", cwd=tmp_path), "is a symlink")
    assert secret.read_text() == "// the user's kernel, outside the export folder\n"
    assert (out / "mhc_pre_big_fuse.cu").is_symlink()


def test_export_force_still_replaces_its_own_files(exported, tmp_path):
    cfg, first = exported
    out = tmp_path / "ex"
    shutil.copytree(first, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    r = evo("export", str(cfg), "-o", str(out), "--force", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# ---------------------------------------------------------------------------
# 7. A family's code that raises, exits, crashes or returns the wrong type: one line naming the family and the hook


@pytest.fixture(scope="module")
def starter(tmp_path_factory):
    """A working family written by `evo new` (its evo check passes on the CPU)."""
    home = tmp_path_factory.mktemp("r2-starter")
    r = evo("new", "mine", "-o", str(home), cwd=home)
    assert r.returncode == 0, r.stderr
    return home / "mine"


def _family_with(starter: Path, tmp_path: Path, code: str) -> Path:
    """A copy of the starter family with ``code`` appended to its family.py; its config."""
    fam = tmp_path / "mine"
    shutil.copytree(starter, fam, ignore=shutil.ignore_patterns("__pycache__"))
    with open(fam / "family.py", "a") as f:
        f.write("\n" + code + "\n")
    return fam / "evo.yaml"


def _check_fails(cfg: Path, *expect: str) -> None:
    r = evo("check", str(cfg), "--sample", "0", "--cpu", cwd=cfg.parent.parent, timeout=240)
    assert r.returncode != 0, (r.stdout, r.stderr)
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out[-3000:]
    fail = [ln for ln in out.splitlines() if "FAIL" in ln or ln.startswith("evo:")]
    assert len(fail) == 1 and all(x in fail[0] for x in expect), out[-3000:]


@pytest.mark.parametrize(
    "code, expect",
    [
        ("import os\nos._exit(0)", ("family mine", "importing family.py called os._exit(0)")),
        ("import sys\nsys.exit(3)", ("family mine", "sys.exit(3)")),
        (
            "import ctypes\nMine.reference = lambda self, *a, **k: ctypes.string_at(0)",
            ("family mine", "reference()", "SIGSEGV"),
        ),
        (
            "import os\nMine.make_inputs = lambda self, *a: os._exit(0)",
            ("family mine", "make_inputs()", "exit status 0"),
        ),
        ("Mine.check = lambda self, g, geos: 42", ("family mine", "check(baseline) returned int")),
    ],
    ids=[
        "os_exit_at_import",
        "sys_exit_at_import",
        "segfault_in_reference",
        "os_exit_in_make_inputs",
        "check_42",
    ],
)
def test_evo_check_names_the_family_and_the_hook_whatever_its_code_does(starter, tmp_path, code, expect):
    _check_fails(_family_with(starter, tmp_path, code), *expect)


def _wait_or_fail(proc: subprocess.Popen, timeout: float) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the process did not end within {timeout} s of one stop request")


@pytest.mark.parametrize("where", ["import", "reference"])
def test_evo_check_of_a_looping_family_honours_the_first_stop(starter, tmp_path, where):
    code = (
        "while True:\n    pass"
        if where == "import"
        else "def _spin(self, *a, **k):\n    while True:\n        pass\nMine.reference = _spin"
    )
    cfg = _family_with(starter, tmp_path, code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evo", "check", str(cfg), "--sample", "0", "--cpu"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(8 if where == "import" else 20)  # well inside the loop (the reference comes after a compile)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    rc = _wait_or_fail(proc, 30)
    out, err = proc.communicate()
    assert rc == 128 + signal.SIGTERM, (rc, out, err)
    assert "Traceback" not in out + err and "stopped by SIGTERM" in err, (out, err)


def _shipped_family_with(tmp_path: Path, code: str) -> Path:
    """A copy of the shipped recorded family with ``code`` appended to family.py, and a recorded config for it."""
    fam = tmp_path / "fam"
    shutil.copytree(FAM.folder, fam, ignore=shutil.ignore_patterns("__pycache__", "ideas"))
    with open(fam / "family.py", "a") as f:
        f.write("\n" + code + "\n")
    cfg = recorded_config(tmp_path, attempts=4)
    cfg.write_text(re.sub(r"^family: .*$", "family: ./fam", cfg.read_text(), flags=re.M))
    return cfg


@pytest.mark.parametrize(
    "code, expect",
    [
        ("MhcPreBigFuse.check = lambda self, g, geos: 42", "check() returned int"),
        (
            "MhcPreBigFuse.check = lambda self, g, geos: {}['nope'] if g != self.baseline() else None",
            "check() raised KeyError",
        ),
    ],
    ids=["returns_42", "raises"],
)
def test_evo_run_names_a_check_that_raises_or_returns_the_wrong_type(tmp_path, code, expect):
    cfg = _shipped_family_with(tmp_path, code)
    r = evo("run", str(cfg), "--plain", cwd=tmp_path)
    line = one_line(r, expect)
    assert "family mhc_pre_big_fuse" in line
    assert "search space exhausted" not in r.stdout


# ---------------------------------------------------------------------------
# 9. Unbounded input: one line each, nothing read to the end of memory


def test_yaml_nested_100k_deep_is_one_line(tmp_path):
    cfg = tmp_path / "deep.yaml"
    cfg.write_text("campaign: x\nfamily: mhc_pre_big_fuse\ngeometries: " + "[" * 100_000 + "]" * 100_000 + "\n")
    one_line(evo("status", str(cfg), cwd=tmp_path), "nested more than", rc=2)


def test_a_100k_digit_number_is_one_line(tmp_path):
    cfg = tmp_path / "big.yaml"
    cfg.write_text("campaign: x\nfamily: mhc_pre_big_fuse\ngeometries: [{name: a, T: " + "9" * 100_000 + "}]\n")
    one_line(evo("status", str(cfg), cwd=tmp_path), "a number of 100000 characters", rc=2)


@pytest.mark.parametrize("kind", ["dev_zero", "sparse_20MB"])
def test_evo_new_refuses_a_kernel_it_cannot_hold(tmp_path, kind):
    if kind == "dev_zero":
        kernel, expect = Path("/dev/zero"), "not a regular file"
    else:
        kernel, expect = tmp_path / "huge.cu", "more than the"
        with open(kernel, "wb") as f:
            f.truncate(20 << 20)
    r = evo("new", "zz", "--kernel", str(kernel), "-o", str(tmp_path), cwd=tmp_path, timeout=120, memory=4 << 30)
    one_line(r, expect, rc=2)
    assert not (tmp_path / "zz").exists()


# ---------------------------------------------------------------------------
# 10. Smaller: a file that is not a config is never echoed


def test_a_config_that_is_some_other_file_is_not_echoed(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$s3cr3tHashValue:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n")
    line = one_line(evo("status", str(secret), cwd=tmp_path), "config error", rc=2)
    assert "s3cr3t" not in line and "root" not in line and "daemon" not in line, line


# ---------------------------------------------------------------------------
# 3. Stop requests: `evo replay` and `evo ablate` honour the first SIGTERM (the attempt in flight finishes)


@pytest.fixture(scope="module")
def thirty(tmp_path_factory):
    """A recorded campaign of 30 attempts (26 rejected ones to replay, a champion of 3 changes to ablate)."""
    home = tmp_path_factory.mktemp("r2-thirty")
    cfg = recorded_config(home, attempts=30)
    r = evo("run", str(cfg), "--plain", cwd=home)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return home


def _stopped_after(home: Path, tmp_path: Path, args: list[str], ready: str) -> tuple[int, str, str]:
    """Runs ``evo ARGS`` on a copy of the campaign, sends one SIGTERM a moment after ``ready`` is printed, and
    returns (exit status, stdout, stderr); fails if the process does not end after that one signal."""
    work = tmp_path / "home"
    shutil.copytree(home, work)
    cfg = work / "c.yaml"
    cfg.write_text(cfg.read_text().replace(str(home), str(work)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    # each recorded timing takes a quarter second, as a GPU's takes seconds: the signal lands mid-way, not after the
    # recorded backend (an instant per attempt) has finished a 30-attempt replay on a fast machine
    slow = (
        "import sys, time; from harness.recorded import RecordedBackend as R; m = R.measure\n"
        "def measure(*a, **k):\n    time.sleep(0.25)\n    return m(*a, **k)\n"
        "R.measure = measure\nfrom evo.cli import main\nsys.exit(main())"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", slow, *args, str(cfg)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if ready in line:
            break
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    rc = _wait_or_fail(proc, 120)
    out, err = proc.communicate()
    return rc, "".join(seen) + out, err


def test_evo_replay_honours_the_first_stop(thirty, tmp_path):
    rc, out, err = _stopped_after(thirty, tmp_path, ["replay"], "A/A noise floor")
    assert rc == 128 + signal.SIGTERM, (rc, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err and "stopped by SIGTERM" in err
    assert "evo replay starts over when run again" in err, err  # (it is not a campaign that resumes)
    m = re.search(r"replayed (\d+) attempt", out)
    assert m is None or int(m.group(1)) < 26, out[-3000:]  # it did not run to the end


def test_evo_ablate_honours_the_first_stop(thirty, tmp_path, monkeypatch):
    """A stop request during one geometry's timing ends the ablation before the next (on the GPU each is minutes;
    the recorded backend times in an instant, so the request is made from inside the first timing)."""
    from evo import stop
    from evo.config import load_config
    from evo.loop.ablate import ablate
    from evo.loop.campaign import Campaign

    work = tmp_path / "home"
    shutil.copytree(thirty, work)
    cfg = work / "c.yaml"
    cfg.write_text(cfg.read_text().replace(str(thirty), str(work)))
    camp = Campaign(load_config(cfg), out=lambda s: None, replaying=True)
    timed = []
    measure = camp.backend.measure

    def measure_then_stop(*args, **kw):
        timed.append(args[1])
        monkeypatch.setattr(stop, "_requested", signal.SIGTERM)  # what the handler records for one SIGTERM
        return measure(*args, **kw)

    monkeypatch.setattr(camp.backend, "measure", measure_then_stop)
    try:
        with pytest.raises(stop.StopRequested):
            ablate(camp, out=lambda s: None)
    finally:
        stop.reset()
        camp.ledger.release()
    assert len(timed) == 1, [g.name for g in timed]


@pytest.mark.parametrize("cmd", ["run", "status"])
def test_a_fifo_at_the_ledger_path_is_refused_before_it_is_opened(tmp_path, cmd):
    fifo = tmp_path / "ledger.db"
    os.mkfifo(fifo)
    cfg = recorded_config(tmp_path)
    cfg.write_text(cfg.read_text().replace(str(tmp_path / "ledger.db"), str(fifo)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evo", cmd, str(cfg)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    rc = _wait_or_fail(proc, 120)
    r = subprocess.CompletedProcess(proc.args, rc, *proc.communicate())
    one_line(r, "is a FIFO", rc=2)
    assert fifo.exists() and not fifo.is_file()


def _one_stop(args: list[str], cwd: Path, after: float) -> tuple[int, str, str]:
    """Runs ``evo ARGS``, sends one SIGTERM ``after`` seconds in, and returns (exit status, stdout, stderr); fails
    if the process does not end after that one signal."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evo", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(after)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    rc = _wait_or_fail(proc, 60)
    out, err = proc.communicate()
    return rc, out, err


def test_evo_check_of_a_million_value_knob_honours_the_first_stop(starter, tmp_path):
    cfg = _family_with(starter, tmp_path, 'FAMILY.knobs = FAMILY.knobs + (Knob("pad", tuple(range(10**6)), 0),)')
    rc, out, err = _one_stop(["check", str(cfg), "--cpu"], tmp_path, 12)
    assert rc == 128 + signal.SIGTERM and "stopped by SIGTERM" in err, (rc, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err


def test_evo_new_of_a_large_kernel_honours_the_first_stop_and_writes_nothing(tmp_path):
    kernel = tmp_path / "big.cu"
    body = (
        "template <int B>\n__global__ void k{i}(float* x, int n) {{\n"
        "  int t = threadIdx.x + B * blockIdx.x;\n  if (t < n) x[t] = x[t] * 2.0f + {i}.0f;\n}}\n"
    )
    kernel.write_text("".join(body.format(i=i) for i in range(60_000)))  # ~8 MB, 3M tokens
    rc, out, err = _one_stop(["new", "big", "--kernel", str(kernel), "--entry", "k1", "-o", str(tmp_path)], tmp_path, 5)
    assert rc == 128 + signal.SIGTERM and "stopped by SIGTERM" in err, (rc, out[-2000:], err[-2000:])
    assert not (tmp_path / "big").exists()
    assert "nothing to resume: run evo new again" in err, err


@pytest.mark.parametrize("target", ["kernel.cu", "logo.png"])
def test_an_idea_with_a_git_binary_patch_section_is_refused(target):
    from evo.search.ideas import IdeaError, parse_idea

    text = "Title: t\nRationale: r\n\n" + make_patch(SRC, SRC.replace(ANCHOR, "#pragma unroll\n" + ANCHOR))
    text += (
        f"diff --git a/{target} b/{target}\nindex 0000000..1111111 100644\nGIT binary patch\nliteral 10\n"
        "RcmZ?wbhEHbRA3Nb0RR9100\n\nliteral 0\nHcmV?d00001\n\n"
    )
    with pytest.raises(IdeaError, match="binary change|changes logo.png"):
        parse_idea(text, slug="bin")


def test_evo_run_of_a_family_that_calls_os_exit_at_import_is_one_line(tmp_path):
    cfg = _shipped_family_with(tmp_path, "import os\nos._exit(0)")
    r = evo("run", str(cfg), "--plain", cwd=tmp_path)
    one_line(r, "importing family.py called os._exit(0)", rc=2)
