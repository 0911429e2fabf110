"""evo from scripts and CI (issue #43): --version, --json documents, exit codes that tell "not checked" from
"clean", "did you mean" for mistyped names, -q, shell completion, and a replay/report path that never imports torch.

Each command runs as a subprocess (a fresh interpreter: sys.modules and stdout are the command's own).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"


def evo(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "evo", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


def config(tmp_path: Path, **changes) -> Path:
    """The shipped config with its ledger and logs in tmp_path, top-level keys replaced."""
    raw = yaml.safe_load(SHIPPED.read_text())
    raw.update(storage=f"sqlite:///{tmp_path / 'ledger.db'}", **changes)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A 6-attempt recorded campaign, run once with --json."""
    tmp = tmp_path_factory.mktemp("eco")
    cfg = config(tmp)
    r = evo(tmp, "run", str(cfg), "--backend", "recorded", "--attempts", "6", "--json")
    return tmp, cfg, r


def one_document(r: subprocess.CompletedProcess) -> dict:
    """stdout is exactly one JSON document (text and warnings went to stderr)."""
    return json.loads(r.stdout)


def test_version_comes_from_pyproject(tmp_path):
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    r = evo(tmp_path, "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"evo {want}", r.stdout + r.stderr
    import evo as evo_pkg

    assert evo_pkg.__version__ == want


def test_the_distribution_name_is_not_evo():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "evo-kernels"  # "evo" on the index is another project
    assert project["license"] and project["keywords"] and len(project["classifiers"]) >= 5
    readme = (ROOT / "README.md").read_text()
    assert "pip install evo-kernels" in readme and "pip install torch==2.13.0 && pip install -e ." in readme


def test_run_json_is_one_document_with_the_summary(campaign):
    _, _, r = campaign
    assert r.returncode == 0, r.stderr[-2000:]
    doc = one_document(r)
    assert doc["command"] == "run" and doc["exit_code"] == 0 and doc["simulated"] is True
    assert doc["attempts"] == 6 and doc["new_attempts"] == 5 and "budget" in doc["stopped"]
    assert doc["champion"]["id"] >= 0 and "verdict" in doc["champion"]
    assert "simulated from recorded H200 measurements" in r.stderr  # the text still says it, on stderr
    assert "warning:" not in r.stderr  # the shipped demo's first run: no spurious warning (its floor is the H200's)


def test_status_json_agrees_with_the_run(campaign):
    tmp, cfg, run = campaign
    r = evo(tmp, "status", str(cfg), "--json")
    assert r.returncode == 0, r.stderr
    doc = one_document(r)
    assert doc["attempts"] == 6 and sum(doc["verdicts"].values()) == 6
    assert doc["champion"]["id"] == one_document(run)["champion"]["id"]
    assert all({"value", "lo", "hi", "attempt"} <= set(v) for v in doc["best_speedup_vs_baseline"].values())


def test_replay_json_and_a_mistyped_gate(campaign):
    tmp, cfg, _ = campaign
    r = evo(tmp, "replay", str(cfg), "--gate", "perff")
    assert r.returncode == 2 and "did you mean 'perf'?" in r.stderr and r.stdout == "", r.stderr
    r = evo(tmp, "replay", str(cfg), "--gate", "perf", "--json")
    assert r.returncode == 0, r.stderr
    doc = one_document(r)
    assert doc["replayed"] and all(p["original"]["gate"] == "perf" for p in doc["replayed"])


def test_sanitize_that_cannot_run_exits_3(campaign):
    tmp, cfg, _ = campaign
    r = evo(tmp, "sanitize", str(cfg), "--backend", "recorded", "--json")
    assert r.returncode == 3, (r.returncode, r.stderr)
    doc = one_document(r)
    assert doc["exit_code"] == 3 and doc["checked"] is False and "runs no kernel" in doc["reason"]


def test_selfcheck_with_unverified_faults_exits_3(campaign):
    tmp, cfg, _ = campaign
    r = evo(tmp, "selfcheck", str(cfg), "--aa", "3", "--json")
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    doc = one_document(r)
    assert doc["unverified"] and doc["aa"]["accepted"] == 0
    assert "not verified here" in r.stderr


def test_export_json_names_the_patches(campaign):
    tmp, cfg, _ = campaign
    r = evo(tmp, "export", str(cfg), "-o", str(tmp / "export"), "--json")
    assert r.returncode == 0, r.stderr
    doc = one_document(r)
    assert doc["patches"] and all(Path(p).is_file() for p in doc["patches"]) and Path(doc["final"]).is_file()


def test_quiet_prints_nothing_on_stdout(campaign):
    tmp, cfg, _ = campaign
    for args in (("-q", "status", str(cfg)), ("status", str(cfg), "-q")):
        r = evo(tmp, *args)
        assert r.returncode == 0 and r.stdout == "", r.stdout


def test_families_and_check_json(tmp_path):
    r = evo(tmp_path, "families", "--json")
    assert r.returncode == 0, r.stderr
    doc = one_document(r)
    fam = next(f for f in doc["families"] if f["name"] == "mhc_pre_big_fuse")
    assert fam["knobs"] and {"name", "values", "default", "exact"} <= set(fam["knobs"][0])
    assert "mhc_pre_big_fuse" in doc["shipped_configs"]
    r = evo(tmp_path, "check", str(tmp_path / "missing.yaml"), "--json")
    assert r.returncode == 2 and one_document(r)["ok"] is False


def test_mistyped_names_get_a_suggestion(tmp_path):
    r = evo(tmp_path, "stauts")
    assert r.returncode == 2 and "did you mean 'status'?" in r.stderr, r.stderr
    r = evo(tmp_path, "status", str(config(tmp_path, budgett={"attempts": 3})))
    assert r.returncode == 2 and "did you mean 'budget'?" in r.stderr, r.stderr
    r = evo(tmp_path, "status", str(config(tmp_path, proposer={"name": "surogate"})))
    assert r.returncode == 2 and "did you mean 'surrogate'?" in r.stderr, r.stderr


def test_exit_codes_are_documented(tmp_path):
    r = evo(tmp_path, "--help")
    assert r.returncode == 0
    for code in ("0 ", "1 ", "2 ", "3 "):
        assert f"\n  {code}" in r.stdout, r.stdout
    readme = (ROOT / "README.md").read_text()
    assert "## Exit codes" in readme and "| 3 |" in readme


def test_bash_completion_names_the_subcommands(tmp_path):
    pytest.importorskip("shtab", reason="shtab is a dependency of evo-kernels; not installed here")
    r = evo(tmp_path, "completion", "bash")
    assert r.returncode == 0, r.stderr
    assert "complete" in r.stdout and "selfcheck" in r.stdout and "--json" in r.stdout


REPORT_PATH = """
import sys
from evo.cli import main
codes = [main(argv) for argv in {argvs!r}]
print(codes, "torch" in sys.modules)
"""


def test_replay_and_report_path_imports_no_torch(tmp_path):
    """`evo run` on the recorded backend, status, log, table and export: torch (754 MB) is never imported."""
    cfg = str(config(tmp_path))
    argvs = [
        ["run", cfg, "--backend", "recorded", "--attempts", "4", "--plain"],
        ["status", cfg],
        ["log", cfg],
        ["table", cfg, "-o", str(tmp_path / "t.csv")],
        ["export", cfg, "-o", str(tmp_path / "export")],
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run(
        [sys.executable, "-c", REPORT_PATH.format(argvs=argvs)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] == "[0, 0, 0, 0, 0] False", r.stdout[-2000:]


def test_the_compile_cache_honours_xdg_cache_home(tmp_path, monkeypatch):
    from harness.build import cache_dir

    monkeypatch.delenv("EVO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "evo" / "cubins" and cache_dir().is_dir()
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "mine"))  # evo's own variable first
    assert cache_dir() == tmp_path / "mine"


def test_export_signs_patches_as_the_users_git_identity(campaign, tmp_path):
    _, cfg, _ = campaign
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "Ada Kernel"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "ada@example.org"], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(PYTHONPATH=str(ROOT), EVO_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run(
        [sys.executable, "-m", "evo", "export", str(cfg), "-o", str(tmp_path / "out"), "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    first = Path(json.loads(r.stdout)["patches"][0]).read_text()
    assert "From: Ada Kernel <ada@example.org>" in first, first[:400]


def test_a_resume_with_the_budget_spent_measures_nothing(tmp_path):
    from evo.config import load_config
    from evo.ledger.ledger import Ledger

    cfg = config(tmp_path)
    r = evo(tmp_path, "run", str(cfg), "--backend", "recorded", "--attempts", "3", "--plain")
    assert r.returncode == 0, r.stderr[-2000:]
    c = load_config(cfg)

    def meta() -> dict:
        m = Ledger(c.storage, c.campaign, c.family.knobs, readonly=True).all_meta()
        return {k: m.get(k) for k in ("noise_floor", "copy_ceiling", "ceiling_checks", "peer_torch_compile")}

    before = meta()
    r = evo(tmp_path, "run", str(cfg), "--backend", "recorded", "--attempts", "3", "--plain")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "nothing measured" in r.stdout and "A/A noise floor" not in r.stdout + r.stderr, r.stdout
    assert "attempt budget reached (3/3)" in r.stdout and "0 new attempt(s), 3 recorded" in r.stdout
    assert meta() == before  # no second A/A floor, ceiling check or peer timing


NAMESPACE_PROBE = """
import pickle, sys
import evo
import harness, harness.build, harness.worker, gates.perf
assert not hasattr(harness, "DECOY"), "another project's top-level harness was taken for evo's"
assert harness is sys.modules["evo.harness"] and harness.build is sys.modules["evo.harness.build"]
assert gates.perf is sys.modules["evo.gates.perf"]
assert pickle.loads(pickle.dumps(harness.worker._child)) is harness.worker._child  # what the spawned worker unpickles
print(harness.worker._child.__module__, evo.__version__)
"""


def test_harness_and_gates_inside_evo_answer_their_old_names(tmp_path):
    """The wheel's layout (evo/harness, evo/gates), made of links to this checkout: `import harness.X` is evo's,
    one module under both names, even with another project's top-level harness on the path."""
    pkg = tmp_path / "site" / "evo"
    pkg.mkdir(parents=True)
    for entry in (ROOT / "evo").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in ("harness", "gates"):
        (pkg / name).symlink_to(ROOT / name)
    decoy = tmp_path / "other" / "harness"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("DECOY = True\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = f"{tmp_path / 'site'}{os.pathsep}{tmp_path / 'other'}"
    r = subprocess.run(
        [sys.executable, "-c", NAMESPACE_PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[0] == "evo.harness.worker", r.stdout


class _FakeRuntime:
    """cupy.cuda.runtime on a machine whose driver is older than CuPy's CUDA (or has none: driver 0)."""

    def __init__(self, driver: int):
        self.driver = driver

    def getDeviceCount(self) -> int:
        e = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")
        e.status = 35  # type: ignore[attr-defined]
        raise e

    def driverGetVersion(self) -> int:
        return self.driver

    def runtimeGetVersion(self) -> int:
        return 13020


@pytest.mark.parametrize("driver", [12040, 0])
def test_a_cuda_12_driver_is_told_apart_from_no_gpu(tmp_path, monkeypatch, capsys, driver):
    """Issue 43 (CUDA 12): under cupy-cuda13x a CUDA 12 driver read as "no CUDA GPU is visible" and backend auto
    silently took the recorded measurements on a machine with a GPU."""
    import types

    from evo.config import load_config
    from evo.loop.errors import CampaignError
    from evo.loop.seams import make_backend
    from harness.build import Builder
    from harness.gpu import gpu_problem

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=_FakeRuntime(driver)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    problem = gpu_problem()
    if driver:
        assert problem is not None and "CUDA 12.4" in problem and "CUDA 13.2" in problem and "driver" in problem
    else:
        assert problem == "no CUDA GPU is visible"
    cfg = load_config(config(tmp_path, backend="gpu"))
    with pytest.raises(CampaignError, match="12.4" if driver else "no CUDA GPU is visible"):
        make_backend(cfg, Builder.for_config(cfg))
    auto = load_config(config(tmp_path, backend="auto"))
    assert make_backend(auto, Builder.for_config(auto)).name == "recorded"
    err = capsys.readouterr().err
    assert ("CUDA 12.4" in err and "recorded" in err) if driver else "warning" not in err
