"""examples/engine_repo: a family kept in an engine's own repository, searched on the H200 (2026-12-04).

The kernel lives in the engine's tree (``csrc/kernels/rmsnorm.cu``: inside ``namespace myengine``, template
parameters, an ``int64_t`` argument, a header of the engine's own include folder); the family folder links to it.
The campaign's ledger is committed with its run (benchmarks/results/2026-12-04-byok-engine-h200): on a CPU the
family checks, and the recorded champion exports as a series that ``git am`` applies to the engine's repository.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "examples" / "engine_repo"
LEDGER = ROOT / "benchmarks" / "results" / "2026-12-04-byok-engine-h200" / "campaign" / "ledger.db.gz"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
}


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**ENV, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_engines_family_checks_and_its_h200_champion_applies_to_the_engines_repository(tmp_path):
    repo = tmp_path / "engine"
    shutil.copytree(SRC, repo, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".cache"))
    kernel = repo / "tuning" / "rms_norm_bf16" / "kernel.cu"
    assert kernel.is_symlink() and kernel.resolve() == (repo / "csrc" / "kernels" / "rmsnorm.cu").resolve()
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "engine"]):
        assert run(repo, *cmd).returncode == 0
    cfg = "tuning/rms_norm_bf16/evo.yaml"
    r = run(repo, sys.executable, "-m", "evo", "check", cfg, "--cpu", "--sample", "2")
    assert r.returncode == 0 and "evo check: pass (rms_norm_bf16" in r.stdout, r.stdout + r.stderr
    db = tmp_path / "ledger.db"
    db.write_bytes(gzip.decompress(LEDGER.read_bytes()))
    storage = f"sqlite:///{db}"
    r = run(repo, sys.executable, "-m", "evo", "status", cfg, "--storage", storage)
    assert r.returncode == 0 and "champion: #3" in r.stdout and "T1_H4096: 1.271x" in r.stdout, r.stdout + r.stderr
    r = run(
        repo, sys.executable, "-m", "evo", "export", cfg, "--storage", storage, "-o", str(tmp_path / "ex"), "--tree"
    )
    assert r.returncode == 0, r.stderr
    (patch,) = sorted((tmp_path / "ex" / "tree").glob("*.patch"))
    assert "- launches myengine::rms_norm_bf16<128, 8, true>" in patch.read_text()
    before = (repo / "csrc" / "kernels" / "rmsnorm.cu").read_text()
    r = run(repo, "git", "am", str(patch))
    assert r.returncode == 0, r.stderr
    assert (repo / "csrc" / "kernels" / "rmsnorm.cu").read_text() == before  # template knobs: the launch site moves
    text = (repo / "tuning" / "rms_norm_bf16" / "family.py").read_text()
    assert "(128, 256, 512, 1024), 128," in text and "(1, 2, 4, 8), 8," in text and "(False, True), True," in text
