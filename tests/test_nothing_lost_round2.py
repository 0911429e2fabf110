"""Nothing lost, round two (issue 45): the cases a hostile user found, outside the ledger's own records.

Each test reproduces one class on the code before the fix: a user's file overwritten or deleted, a stop request
not honoured, a family's code that exits or crashes passing silently, unbounded input read to the end, and the
smaller messages. The CLI's behaviour is tested through `evo` as a subprocess, as a user meets it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evo.core.family import load_family
from evo.search.ideas import make_patch

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"
FAM = load_family("mhc_pre_big_fuse")
SRC = FAM.source()
ANCHOR = "  for (int hb = h0 + tid * VEC_ELEMS; hb < h1; hb += stride * EVO_UNROLL) {\n"


def evo(*args: str, cwd: Path = ROOT, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "evo", *args], cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout
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
