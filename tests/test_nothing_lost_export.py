"""evo export writes where it was told, never loses or replaces files it did not write, and takes empty steps."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from evo.cli import main
from evo.core.family import load_family
from evo.report.export import MANIFEST, export, lasting_series

ROOT = Path(__file__).resolve().parent.parent
FAM = load_family("mhc_pre_big_fuse")


def _config(folder: Path, storage: str, attempts: int = 25) -> Path:
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    # rule every: its recorded path takes several lasting steps (rule weighted reaches the optimum in fewer)
    text = text.replace("rule: weighted", "rule: every")
    # the proposer's trajectory pinned (not the shipped default, which selections move): several accepted steps
    assert "  options: {}" in text, "the shipped config no longer gives its proposer no options"
    text = text.replace("  options: {}", "  options: {ordinal: 1.0}")
    cfg = folder / "c.yaml"
    cfg.write_text(text + f"\nstorage: {storage}\n")
    return cfg


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """One recorded campaign with accepted steps, its ledger at a relative path as in the README's example."""
    import os

    home = tmp_path_factory.mktemp("export-campaign")
    old = os.getcwd()
    os.chdir(home)
    try:
        cfg = _config(home, "sqlite:///logs/x/ledger.db")
        assert main(["run", str(cfg), "--plain"]) == 0
    finally:
        os.chdir(old)
    return home


@pytest.fixture
def work(campaign, tmp_path, monkeypatch):
    """A copy of the campaign folder to work in (cwd), and its config."""
    home = tmp_path / "home"
    shutil.copytree(campaign, home, ignore=shutil.ignore_patterns("export"))
    monkeypatch.chdir(home)
    return home, home / "c.yaml"


def _ledger_attempts(home: Path):
    from evo.config import load_config
    from evo.ledger.ledger import Ledger

    c = load_config(home / "c.yaml")
    led = Ledger(c.storage, c.campaign, c.family.knobs)
    return led.attempts(), led.all_meta()


def _accepted(home: Path) -> int:
    """The patches an export of the campaign holds: one per lasting change (steps undoing others squashed)."""
    atts = _ledger_attempts(home)[0]
    return len(lasting_series(atts[0], [a for a in atts if a.verdict.status == "accepted"]))


def test_relative_output_lands_under_the_working_directory(work, capsys):
    home, cfg = work
    n = _accepted(home)
    assert n >= 2
    assert main(["export", str(cfg), "-o", "relexp"]) == 0
    assert len(list((home / "relexp").glob("*.patch"))) == n
    assert f"{n} patch(es)" in capsys.readouterr().out


def test_dotdot_output_is_resolved_from_the_working_directory(work):
    home, cfg = work
    (home / "sub").mkdir()
    assert main(["export", str(cfg), "-o", "sub/../dd2"]) == 0
    assert len(list((home / "dd2").glob("*.patch"))) == _accepted(home)


def test_default_output_with_the_readme_relative_storage(work):
    home, cfg = work
    assert main(["export", str(cfg)]) == 0
    out = home / "logs" / "x" / "export"
    assert len(list(out.glob("*.patch"))) == _accepted(home)
    assert (out / MANIFEST).is_file() and (out / "mhc_pre_big_fuse.cu").is_file()


def test_folder_with_foreign_files_is_refused_and_left_alone(work, capsys):
    home, cfg = work
    out = home / "mine"
    out.mkdir()
    (out / "0001-my-important-fix.patch").write_text("mine\n")
    (out / "keep.patch").write_text("keep\n")
    (out / "mhc_pre_big_fuse.cu").write_text("// my kernel\n")
    before = {p.name: p.read_text() for p in out.iterdir()}
    assert main(["export", str(cfg), "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "evo export did not write" in err[0], err
    assert main(["export", str(cfg), "-o", str(out), "--force"]) == 2  # --force is for evo's own files only
    assert {p.name: p.read_text() for p in out.iterdir()} == before


def test_an_earlier_export_needs_force_and_force_replaces_only_it(work, capsys):
    home, cfg = work
    out = home / "ex"
    assert main(["export", str(cfg), "-o", str(out)]) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["export", str(cfg), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["export", str(cfg), "-o", str(out), "--force"]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # the same steps give the same files
    (out / "notes.txt").write_text("mine\n")
    assert main(["export", str(cfg), "-o", str(out), "--force"]) == 2
    assert (out / "notes.txt").read_text() == "mine\n"


def test_force_refuses_an_exported_file_the_user_changed(work, capsys):
    home, cfg = work
    out = home / "ex"
    assert main(["export", str(cfg), "-o", str(out)]) == 0
    (out / "mhc_pre_big_fuse.cu").write_text("// edited by hand\n")
    capsys.readouterr()
    assert main(["export", str(cfg), "-o", str(out), "--force"]) == 2
    assert "was changed since evo exported it" in capsys.readouterr().err
    assert (out / "mhc_pre_big_fuse.cu").read_text() == "// edited by hand\n"


def test_output_that_is_a_file_is_refused(work, capsys):
    home, cfg = work
    (home / "afile").write_text("x")
    assert main(["export", str(cfg), "-o", "afile"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert (home / "afile").read_text() == "x"


def test_steps_with_identical_source_make_no_empty_patch(work, tmp_path):
    home, _ = work
    attempts, meta = _ledger_attempts(home)
    acc = [a for a in attempts if a.verdict.status == "accepted"]
    # the same kernel accepted twice in a row (a re-measure): the second has nothing to apply (the champion's twin:
    # a twin of an earlier step is squashed with it where a later step undoes that step's change)
    twin = dataclasses.replace(acc[-1], id=acc[-1].id + 1000)
    series = [a for a in attempts if a.verdict.status != "accepted"] + acc + [twin]
    notes: list[str] = []
    out = tmp_path / "twin"
    patches = export(FAM, series, meta, out, notes=notes)
    same = [n for n in notes if "same kernel source" in n]
    assert len(patches) == len(lasting_series(attempts[0], acc)) and len(same) == 1
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
    shutil.copyfile(out / "baseline-mhc_pre_big_fuse.cu", repo / "mhc_pre_big_fuse.cu")
    run("add", ".")
    run("commit", "-q", "-m", "baseline")
    run("am", *map(str, patches))
    assert (repo / "mhc_pre_big_fuse.cu").read_text() == (out / "mhc_pre_big_fuse.cu").read_text()
