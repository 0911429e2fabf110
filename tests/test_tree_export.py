"""`evo export --tree`: the series as patches to the family's own kernel.cu and family.py, applied with git am in
the user's repository, ending at files whose defaults are the champion (same machine code, same baseline)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from evo.family import load_family
from evo.records import Attempt, Interval, Verdict
from evo.report.export import export
from evo.report.tree_export import (
    TreeError,
    set_knob_defaults,
    set_macro_defaults,
    step_files,
    tree_differences,
    tree_paths,
    tree_series,
)
from evo.search.ideas import apply_ideas, gene, knob_part, load_folder_ideas
from harness.build import Builder, compile_source, resolve_source, sass_digest

ROOT = Path(__file__).resolve().parent.parent
MHC = load_family("mhc_pre_big_fuse")
MHC_SPECS = [{"S": 1, "prenorm": False}, {"S": 32, "prenorm": False}]
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env={**ENV, "HOME": str(repo)}
    ).stdout


def user_repo(tmp_path: Path, src: Path, rel: str) -> Path:
    """A git repository holding a copy of the family folder ``src`` at ``rel``, committed."""
    repo = tmp_path / "user"
    shutil.copytree(src, repo / rel, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "README").write_text("a user's project\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the user's tree")
    return repo


def standalone(folder: Path, spec: dict) -> str:
    """The SASS digest of the folder's kernel.cu compiled as it is: no knob macro given, only the geometry's."""
    fam = load_family(str(folder))
    defs = "".join(f"#define EVO_{k.upper()} {int(v)}\n" for k, v in spec.items())
    cubin, _, _ = compile_source(defs + fam.source(), fam.entry, "sm_90")
    return sass_digest(cubin)


# --- kernel.cu: the knob macros' defaults ---------------------------------------------------------------------

SRC = """// a kernel
// EVO_VEC in a comment is no use

#include <x.h>
#ifndef EVO_BLOCK
#define EVO_BLOCK 256  // threads
#endif
#ifndef EVO_S
#define EVO_S 1
#endif

#if EVO_MODE == EVO_MODE_FAST
int a = EVO_VEC * EVO_BLOCK;
#endif
"""


def test_macro_defaults_are_rewritten_in_place_and_missing_ones_inserted_after_the_kernels_own():
    out = set_macro_defaults(
        SRC,
        {"EVO_BLOCK": "128", "EVO_VEC": "8", "EVO_MODE": "EVO_MODE_FAST"},
        {"EVO_MODE": {"EVO_MODE_SLOW": 0, "EVO_MODE_FAST": 1}},
    )
    assert "#define EVO_BLOCK 128  // threads\n" in out and "EVO_BLOCK 256" not in out
    head, tail = out.split("#define EVO_S 1\n#endif\n", 1)
    assert "#ifndef EVO_VEC\n#define EVO_VEC 8\n#endif\n" in tail  # after the kernel's own blocks, before its use
    mode = "#ifndef EVO_MODE\n#define EVO_MODE_SLOW 0\n#define EVO_MODE_FAST 1\n#define EVO_MODE EVO_MODE_FAST\n"
    assert mode in tail  # a string knob's constants go with it: the kernel does not define them
    assert tail.index("#ifndef EVO_VEC") < tail.index("int a")
    assert out.replace("128  // threads", "256  // threads").count("\n") == SRC.count("\n") + 10
    # onto the result (a tree the series was applied to): only the values change, no block is added twice
    again = set_macro_defaults(out, {"EVO_BLOCK": "512", "EVO_VEC": "16", "EVO_MODE": "EVO_MODE_SLOW"}, {})
    assert again.count("#ifndef EVO_VEC") == 1 and "#define EVO_VEC 16\n" in again
    assert "#define EVO_MODE EVO_MODE_SLOW\n" in again and again.count("#define EVO_MODE_FAST 1") == 1
    # no default blocks: after the header comment; CRLF files stay CRLF
    crlf = "// k\r\n\r\nint f() { return EVO_X; }\r\n"
    out = set_macro_defaults(crlf, {"EVO_X": "3"}, {})
    assert out.startswith("// k\r\n\r\n// evo export --tree")
    assert "#ifndef EVO_X\r\n#define EVO_X 3\r\n#endif\r\n" in out
    assert "\n" not in out.replace("\r\n", "")


@pytest.mark.parametrize(
    "genome",
    [
        {"meta": "slice", "barrier": "early", "vec": 8, "unroll": 2, "block": 128},
        {"split_reduce": "warp", "h_split": 4, "warp0_stream": True, gene("unroll-stream-loop"): True},
    ],
)
def test_tree_kernel_compiled_with_no_knob_macro_is_the_genomes_machine_code(genome):
    """kernel.cu with the genome as its defaults (ideas applied), compiled with the geometry's macros only, gives
    what the harness builds for the genome; under the harness's macros it still gives every other genome's code."""
    book = load_folder_ideas(MHC)[0]
    g = {**MHC.baseline(), **genome}
    kernel, _ = step_files(MHC, g, book, MHC.source(), (MHC.folder / "family.py").read_text(), MHC_SPECS)
    body = apply_ideas(MHC.source(), g, book)
    for spec in MHC_SPECS:
        ref, _, _ = compile_source(resolve_source(MHC, g, spec, body), MHC.entry, "sm_90")
        defs = "".join(f"#define EVO_{k.upper()} {int(v)}\n" for k, v in spec.items())
        mine, _, _ = compile_source(defs + kernel, MHC.entry, "sm_90")
        assert sass_digest(mine) == sass_digest(ref), spec
    other = MHC.baseline()  # the harness's macros override every inserted default
    ref, _, _ = compile_source(resolve_source(MHC, other, MHC_SPECS[0], body), MHC.entry, "sm_90")
    mine, _, _ = compile_source(resolve_source(MHC, other, MHC_SPECS[0], kernel), MHC.entry, "sm_90")
    assert sass_digest(mine) == sass_digest(ref)


# --- family.py: the Knob(...) defaults ------------------------------------------------------------------------


def test_knob_defaults_change_only_the_default_argument():
    text = (MHC.folder / "family.py").read_text()
    new = set_knob_defaults(text, {"block": 512, "meta": "slice", "warp0_stream": True, "vec": 16})
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert changed == [
        (
            '        Knob("block", (128, 256, 512), 256, doc="threads per block"),',
            '        Knob("block", (128, 256, 512), 512, doc="threads per block"),',
        ),
        ('            "array",', '            "slice",'),
        (
            '        Knob("warp0_stream", (False, True), False, doc="warp 0 joins the residual stream after its '
            'metadata work"),',
            '        Knob("warp0_stream", (False, True), True, doc="warp 0 joins the residual stream after its '
            'metadata work"),',
        ),
    ]
    assert len(new.splitlines()) == len(text.splitlines())
    kw = "K = Knob(name='x', values=(1, 2), default=1)\nJ = f.Knob('y', (1, 2), default=2)  # é\n"
    assert set_knob_defaults(kw, {"x": 2, "y": 1}) == kw.replace("default=1", "default=2").replace(
        "default=2)  #", "default=1)  #"
    )


def test_a_knob_whose_call_cannot_be_found_fails_in_one_line_naming_it():
    loop = "KNOBS = tuple(Knob(n, (1, 2), 1) for n in ('a', 'b'))\n"
    with pytest.raises(TreeError, match=r"no Knob\('a', \.\.\.\) call") as e:
        set_knob_defaults(loop, {"a": 2})
    assert "\n" not in str(e.value) and "knob a's default" in str(e.value)
    with pytest.raises(TreeError, match=r"2 Knob\('a', \.\.\.\) call"):
        set_knob_defaults("A = Knob('a', (1, 2), 1)\nB = Knob('a', (1, 2), 2)\n", {"a": 2})
    # the shipped mhc_pre_decode takes its knobs from mhc_pre_big_fuse's family.py: no call in its own
    dec = load_family("mhc_pre_decode")
    with pytest.raises(TreeError, match=r"family\.py: no Knob\('\w+', \.\.\.\) call"):
        step_files(dec, dec.baseline(), {}, dec.source(), (dec.folder / "family.py").read_text())


# --- the series, applied in a user's repository ---------------------------------------------------------------


def _config(repo: Path, rel: str, attempts: int) -> Path:
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("family: mhc_pre_big_fuse", f"family: {repo / rel}")
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    cfg = repo.parent / "c.yaml"
    cfg.write_text(text + f"\nstorage: sqlite:///{repo.parent}/ledger.db\n")
    return cfg


def test_tree_series_of_a_recorded_campaign_applies_with_git_am_and_ends_at_the_champion(tmp_path, monkeypatch, capsys):
    from evo.cli import main
    from evo.config import load_config
    from evo.ledger.ledger import Ledger

    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    rel = "kernels/mhc_pre_big_fuse"
    repo = user_repo(tmp_path, ROOT / "candidates" / "mhc_pre_big_fuse", rel)
    cfg = _config(repo, rel, 25)
    assert main(["run", str(cfg), "--plain"]) == 0
    c = load_config(cfg)
    attempts = Ledger(c.storage, c.campaign, c.family.knobs).attempts()
    champ = [a for a in attempts if a.verdict.status == "accepted"][-1]
    assert knob_part(champ.genome) != c.family.baseline()
    capsys.readouterr()
    out = tmp_path / "export"
    assert main(["export", str(cfg), "-o", str(out), "--tree"]) == 0
    said = capsys.readouterr().out
    assert f"git top level {repo}" in said and "WARNING" not in said
    resolved = sorted(out.glob("*.patch"))
    tree = sorted((out / "tree").glob("*.patch"))
    assert resolved and len(tree) == len(resolved)
    for p, q in zip(resolved, tree):  # the same commit messages: the reviewer reads the same facts
        message = lambda f: f.read_text().split("\nSubject: ", 1)[1].split("\n---\n", 1)[0]  # noqa: E731
        assert message(p) == message(q)
        assert f"a/{rel}/kernel.cu" in q.read_text()
    git(repo, "am", *map(str, tree))
    assert "Kernel speedup" in git(repo, "log", "-1", "--format=%B")
    folder = repo / rel
    fam = load_family(str(folder))
    assert fam.baseline() == knob_part(champ.genome)  # the champion is the family's baseline now
    built = Builder(fam, list(c.geometries), "sm_90").build(fam.baseline())  # through the harness's macros
    assert built.sass_sha256 == champ.sass_sha256
    body = c.family.source()
    for spec in MHC_SPECS:  # and as it stands, without a knob macro
        ref, _, _ = compile_source(resolve_source(c.family, champ.genome, spec, body), c.family.entry, "sm_90")
        assert standalone(folder, spec) == sass_digest(ref), spec
    assert git(repo, "status", "--porcelain") == ""  # only the family's two files changed, all committed
    changed = git(repo, "diff", "--name-only", "HEAD~" + str(len(tree)), "HEAD").split()
    assert changed == [f"{rel}/family.py", f"{rel}/kernel.cu"]

    # --force replaces the earlier export's tree files too; an export without --tree removes them
    assert main(["export", str(cfg), "-o", str(out), "--force"]) == 0
    assert not (out / "tree").exists() and sorted(out.glob("*.patch")) == resolved

    # a Knob(...) whose name is computed: one line naming the knob, exit 2, nothing written
    fpy = folder / "family.py"
    fpy.write_text(fpy.read_text().replace('Knob("block", ', 'Knob("bl" + "ock", ', 1))
    capsys.readouterr()
    assert main(["export", str(cfg), "-o", str(tmp_path / "none"), "--tree"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{rel}/family.py: no Knob('block', ...) call" in err and "\n" not in err
    assert not (tmp_path / "none").exists()


def test_a_tree_that_changed_since_the_campaign_is_said_in_the_output_and_every_commit(tmp_path, monkeypatch, capsys):
    from evo.cli import main

    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    rel = "mhc_pre_big_fuse"
    repo = user_repo(tmp_path, ROOT / "candidates" / "mhc_pre_big_fuse", rel)
    cfg = _config(repo, rel, 12)
    assert main(["run", str(cfg), "--plain"]) == 0
    k = repo / rel / "kernel.cu"
    k.write_text(k.read_text().replace("typedef unsigned int u32;", "typedef unsigned int u32;  // 32 bits"))
    git(repo, "commit", "-q", "-am", "a comment")
    capsys.readouterr()
    out = tmp_path / "export"
    assert main(["export", str(cfg), "-o", str(out), "--tree"]) == 0
    said = capsys.readouterr().out
    assert "WARNING: tree: not what the campaign measured: the source of baseline #" in said
    tree = sorted((out / "tree").glob("*.patch"))
    assert tree and all("Caveat: the family's files this patch applies to" in p.read_text() for p in tree)
    assert not any("Caveat: the family" in p.read_text() for p in out.glob("*.patch"))  # the resolved series ran
    git(repo, "am", *map(str, tree))  # it still applies
    assert "// 32 bits" in k.read_text()


def _att(i: int, genome: dict, status: str, sha: tuple[str, str] = ("", "")) -> Attempt:
    iv = Interval(1.0 + i / 10, 1.0 + i / 10 - 0.01, 1.0 + i / 10 + 0.01, n=12)
    return Attempt(
        id=i,
        campaign="rms",
        family="fused_add_rmsnorm",
        genome=genome,
        genome_key=str(i),
        origin="baseline" if status == "baseline" else f"mutation of #{i - 1}",
        verdict=Verdict(status="baseline") if status == "baseline" else Verdict.accepted("faster"),
        source_sha256=sha[0],
        sass_sha256=sha[1],
        speedup_vs_parent={"T1_H4096": iv},
        speedup_vs_baseline={"T1_H4096": iv},
        finished_at=f"2026-12-0{i + 1}T00:00:00+00:00",
    )


def test_template_knobs_live_in_family_py_and_a_folder_outside_git_takes_git_apply(tmp_path, monkeypatch):
    """The example's knobs are template parameters: the tree series leaves kernel.cu alone and moves family.py's
    defaults; in a git repository git am applies it, in a folder outside one its paths start at the parent."""
    from evo.config import load_config

    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    src = ROOT / "examples" / "fused_add_rmsnorm"
    for where in ("git", "plain"):
        if where == "git":
            repo = user_repo(tmp_path / where, src, "ex/fused_add_rmsnorm")
            folder = repo / "ex" / "fused_add_rmsnorm"
        else:
            folder = tmp_path / where / "fused_add_rmsnorm"
            shutil.copytree(src, folder, ignore=shutil.ignore_patterns("__pycache__"))
        cfg = load_config(folder / "evo.yaml")
        fam = cfg.family
        builder = Builder.for_config(cfg, "sm_90")
        steps = [
            fam.baseline(),
            fam.genome({"vec": 8}),
            fam.genome({"vec": 8, "block": 512, "reduce": "all_warps"}),
            fam.genome({"vec": 8, "block": 512, "reduce": "all_warps", "cache": 2}),
        ]
        atts = []
        for i, g in enumerate(steps):
            b = builder.build(g)
            atts.append(_att(i, dict(g), "baseline" if i == 0 else "accepted", (b.source_sha256, b.sass_sha256)))
        assert tree_differences(cfg, atts[0]) == []
        paths = tree_paths(fam)
        assert paths.in_git == (where == "git") and paths.family_py.endswith("fused_add_rmsnorm/family.py")
        series = tree_series(fam, atts, {}, [{}])
        assert len(series.files) == 3 and all(n.startswith("tree/") for n in series.files)
        out = tmp_path / where / "export"
        export(fam, atts, {}, out, specs=[{}], extra_files=series.files)
        patches = sorted(map(str, (out / "tree").glob("*.patch")))
        assert all("kernel.cu" not in Path(p).read_text().split("\n---\n", 1)[1] for p in patches)
        # what the engine's launch site must instantiate now: in each commit message (the template's arguments
        # live there, not in kernel.cu)
        last = Path(patches[-1]).read_text().split("\n---\n", 1)[0]
        assert "- launches fused_add_rmsnorm<512, 8, 2, Reduce::all_warps>" in last, last
        if where == "git":
            git(repo, "am", *patches)
        else:
            assert paths.root == folder.parent
            subprocess.run(["git", "apply", *patches], cwd=paths.root, check=True, capture_output=True, env=ENV)
        fam2 = load_family(str(folder))
        assert fam2.baseline() == steps[-1]
        assert Builder(fam2, list(cfg.geometries), "sm_90").build(fam2.baseline()).sass_sha256 == atts[-1].sass_sha256
        assert (folder / "kernel.cu").read_text() == (src / "kernel.cu").read_text()
        # the tree now differs from what was measured: its defaults, knob by knob, and (once kernel.cu changes) its
        # source; the defaults alone leave the baseline genome's source as it was
        diff = tree_differences(load_config(folder / "evo.yaml"), atts[0])
        assert diff == [
            "family.py's knob defaults are not those of the measured baseline #0: block 256 then, 512 now; "
            "cache 0 then, 2 now; reduce 'warp0' then, 'all_warps' now; vec 1 then, 8 now"
        ]
        (folder / "kernel.cu").write_text((folder / "kernel.cu").read_text() + "// a comment\n")
        diff = tree_differences(load_config(folder / "evo.yaml"), atts[0])
        assert len(diff) == 2 and "source of baseline #0 built from today's files differs" in diff[1]
