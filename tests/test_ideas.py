"""Source-level ideas: patches as genes, the outside proposer hook, `evo idea add` / `evo ideas`, export and log.

On the CPU: parsing and applying patches, conflicts, stale ideas, compile errors, the outside proposer's failure
modes (garbage, hang, non-zero exit) as recorded verdicts, the rule-based proposer, the CLI, export and the log.
The recorded backend cannot judge a source variant (error: not_recorded). "Computes the wrong result" needs a GPU.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evo.config import ConfigError, load_config
from evo.core.family import load_family
from evo.core.genome import Genome
from evo.core.records import ACCEPTED, BASELINE, Attempt, Interval, Timing, Verdict
from evo.loop.campaign import Campaign, CampaignError
from evo.search.base import Proposal
from evo.search.ideas import (
    Idea,
    IdeaError,
    apply_ideas,
    change_signature,
    check_idea,
    delta,
    describe_change,
    idea_hook,
    idea_slugs,
    knob_part,
    load_folder_ideas,
    make_patch,
    normalize_patch,
    parse_idea,
    toggled,
    with_ideas,
)
from harness.build import BuildError, apply_patch

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"
FAM = load_family("mhc_pre_big_fuse")
SRC = FAM.source()
ANCHOR = "  for (int hb = h0 + tid * VEC_ELEMS; hb < h1; hb += stride * EVO_UNROLL) {\n"  # the residual stream loop


def idea_from(slug: str, new_source: str, title: str = "t", rationale: str = "r", exact: bool = True) -> Idea:
    return Idea(slug, title, rationale, make_patch(SRC, new_source), exact, "test")


def insert_before(anchor: str, line: str, source: str = SRC) -> str:
    assert source.count(anchor) == 1, f"kernel.cu no longer has {anchor!r}"
    return source.replace(anchor, line + anchor)


def write_config(tmp_path: Path, attempts: int, extra: str = "", name: str = "c") -> Path:
    """The shipped config, recorded backend, one module per genome (no S=32 geometry), storage under tmp_path."""
    text = SHIPPED.read_text()
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
    text = re.sub(r"^  - \{name: T1_H4096_S32,.*\n", "", text, flags=re.M)
    text = re.sub(r"^peer: .*$", "peer: {torch_compile: 'off'}", text, flags=re.M)
    text += f"storage: sqlite:///{tmp_path / (name + '.db')}\n" + extra
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------
# patches and ideas


def test_idea_file_parses_and_normalizes_paths():
    patch = make_patch(SRC, insert_before(ANCHOR, "#pragma unroll\n"))
    foreign = patch.replace("a/kernel.cu", "a/candidates/mhc_pre_big_fuse/kernel.cu").replace(
        "b/kernel.cu", "b/candidates/mhc_pre_big_fuse/kernel.cu"
    )
    text = (
        "Title: Unroll the stream loop\nRationale: constant indices,\n  so registers\nExact: no\n\nfree text\n"
        + foreign
    )
    idea = parse_idea(text, slug="cols")
    assert idea.title == "Unroll the stream loop" and idea.rationale == "constant indices, so registers"
    assert idea.exact is False and idea.gene == "idea:cols"
    assert idea.patch == patch and "candidates/" not in idea.patch
    back = parse_idea(idea.text(), slug="cols")
    assert (back.title, back.rationale, back.exact, back.patch) == (idea.title, idea.rationale, idea.exact, idea.patch)


@pytest.mark.parametrize(
    "text, why",
    [
        ("hello, world\n", "not a unified diff"),
        ("--- a/kernel.cu\n+++ b/kernel.cu\n", "no hunk"),
        ("--- a/other.h\n+++ b/other.h\n@@ -1 +1 @@\n-a\n+b\n", "may only change kernel.cu"),
        ("--- /dev/null\n+++ b/kernel.cu\n@@ -0,0 +1 @@\n+a\n", "creates or deletes"),
        (
            "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-a\n+b\n"
            "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -3 +3 @@\n-c\n+d\n",
            "more than one file",
        ),
    ],
)
def test_bad_patches_are_refused_with_a_reason(text, why):
    with pytest.raises(IdeaError, match=why):
        normalize_patch(text)


def test_change_signature_ignores_line_numbers_but_not_place():
    a = make_patch(SRC, insert_before(ANCHOR, "#pragma unroll\n"))
    shifted = "// a comment that moves every line down\n" + SRC
    b = make_patch(shifted, insert_before(ANCHOR, "#pragma unroll\n", shifted))
    assert a != b and change_signature(a) == change_signature(b)
    other = "        for (int c = 0; c < MIX; ++c) y_local[c] = __fadd_rn(y_local[c], row[c]);\n"
    c = make_patch(SRC, insert_before(other, "#pragma unroll\n"))
    assert change_signature(c) != change_signature(a)  # the same inserted line elsewhere is another change


def test_shipped_ideas_apply_compile_and_are_what_they_say():
    book, broken = load_folder_ideas(FAM)
    assert not broken and len(book) >= 2
    for idea in book.values():
        assert idea.title and idea.rationale and idea.exact
    facts = check_idea(FAM, book["register-slice"], others=book)
    spec = next(iter(facts["specs"].values()))
    assert spec["stack_frame"][0] > 0 and spec["stack_frame"][1] == 0  # the 24-float array left local memory
    assert not facts["same_sass"]
    assert "unroll-split-sum" in facts["conflicts"]  # both edit the array form's split loop


def test_genes_leave_knob_genomes_alone():
    base = FAM.baseline()
    g = with_ideas(base.replace(block=128), ["b-idea", "a-idea"])
    assert idea_slugs(g) == ["a-idea", "b-idea"] and g["idea:a-idea"] is True
    assert knob_part(g) == base.replace(block=128) and knob_part(g).key == base.replace(block=128).key
    assert "idea" not in base.key
    assert describe_change(g, base) == "block 256->128, +idea a-idea, +idea b-idea"
    assert delta(toggled(g, "a-idea"), g) == "-idea a-idea"
    assert describe_change(base.replace(vec=8), base) == base.replace(vec=8).describe_change(base)


def test_apply_ideas_verdicts_name_the_idea_and_the_hunk():
    good = idea_from("good", insert_before(ANCHOR, "#pragma unroll\n"))
    clash = idea_from("zclash", insert_before(ANCHOR, "#pragma unroll 2\n"))
    stale = Idea(
        "stale",
        "t",
        "r",
        "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,3 +1,3 @@\n this line\n-is not\n+was never\n in kernel.cu\n",
    )
    book = {i.slug: i for i in (good, clash, stale)}
    base = FAM.baseline()
    assert "#pragma unroll\n" + ANCHOR in apply_ideas(SRC, with_ideas(base, ["good"]), book)
    with pytest.raises(
        IdeaError,
        match=r"idea stale no longer applies to kernel.cu: hunk at kernel.cu:1 does not apply "
        r"\(its context is not in the source: this line \| is not \| in kernel.cu\)",
    ):
        apply_ideas(SRC, with_ideas(base, ["stale"]), book)
    with pytest.raises(IdeaError, match=r"ideas good and zclash do not apply together: zclash's hunk at kernel.cu:\d+"):
        apply_ideas(SRC, with_ideas(base, ["good", "zclash"]), book)
    with pytest.raises(IdeaError, match="unknown idea 'nope'"):
        apply_ideas(SRC, with_ideas(base, ["nope"]), book)


def test_builder_applies_a_genomes_ideas():
    from evo.core.family import Geometry
    from harness.build import Builder

    g = Geometry("g", {"T": 4, "H": 4096, "S": 1, "prenorm": False})
    idea = idea_from("one", insert_before(ANCHOR, "#pragma unroll\n"))
    b = Builder(FAM, [g], "sm_90", source_hook=idea_hook({"one": idea}))
    assert b.source_for(FAM.baseline()) == SRC
    built = b.build(with_ideas(FAM.baseline(), ["one"]))
    assert "#pragma unroll\n" + ANCHOR in next(iter(built.source.values()))
    with pytest.raises(BuildError, match="no source hook"):  # the builder itself knows nothing of ideas
        Builder(FAM, [g], "sm_90").build(with_ideas(FAM.baseline(), ["one"]))


# ---------------------------------------------------------------------------
# ideas in a campaign (recorded backend: the CPU gates run, measuring needs a GPU)


def test_campaign_verdicts_for_stale_broken_conflicting_and_good_ideas(tmp_path):
    camp = Campaign(load_config(write_config(tmp_path, 12, "ideas: {toggle: 0}\n")), out=lambda s: None)
    camp.setup()
    base = FAM.baseline()
    ideas = {
        "good": idea_from("good", insert_before(ANCHOR, "#pragma unroll 2\n"), "Unroll the stream loop", "loads"),
        "clash": idea_from("clash", insert_before(ANCHOR, "#pragma unroll 4\n")),
        "broken": idea_from("broken", SRC + "\nthis is not C++;\n", "Broken", "does not compile"),
        "stale": Idea(
            "stale",
            "Stale",
            "was written against an older kernel.cu",
            "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,2 +1,2 @@\n // old first line\n-old\n+new\n",
        ),
    }
    camp.ideas.update(ideas)
    got = {}
    for name, slugs in (("stale", ["stale"]), ("broken", ["broken"]), ("both", ["clash", "good"]), ("good", ["good"])):
        got[name] = camp.evaluate(Proposal(with_ideas(base, slugs), f"test: {name}"))
    assert got["stale"].verdict.label() == "error: idea"
    assert "idea stale no longer applies to kernel.cu: hunk at kernel.cu:1" in got["stale"].verdict.reason
    assert got["broken"].verdict.label() == "error: compile" and got["broken"].verdict.gate == "static"
    assert "kernel.cu(" in got["broken"].verdict.reason and "error" in got["broken"].verdict.reason
    assert got["both"].verdict.label() == "error: idea"
    assert "ideas clash and good do not apply together" in got["both"].verdict.reason
    g = got["good"]
    assert g.verdict.label() == "error: not_recorded" and "need a GPU" in g.verdict.reason
    assert g.resources and g.sass_sha256  # the static gate ran on the CPU
    # Every verdict is in the ledger with its genome; the ideas they used are frozen with them.
    led = camp.ledger.attempts()
    assert [a.verdict.label() for a in led[-4:]] == [
        got[k].verdict.label() for k in ("stale", "broken", "both", "good")
    ]
    assert led[-1].genome == dict(with_ideas(base, ["good"])) and led[-1].genome_key == with_ideas(base, ["good"]).key
    frozen = camp.ledger.meta("ideas")
    assert {"good", "clash", "broken", "stale"} <= set(frozen) and frozen["good"]["patch"] == ideas["good"].patch
    # The campaign goes on from there.
    s = camp.run()
    assert s.stopped.startswith("attempt budget reached") and len(camp.ledger.attempts()) == 12


def test_inexact_idea_is_rejected_in_exact_mode_without_measuring(tmp_path):
    camp = Campaign(load_config(write_config(tmp_path, 3)), out=lambda s: None)
    camp.setup()
    camp.ideas["order"] = idea_from("order", insert_before(ANCHOR, "#pragma unroll 2\n"), exact=False)
    a = camp.evaluate(Proposal(with_ideas(FAM.baseline(), ["order"]), "test"))
    assert a.verdict.label() == "rejected: correctness"
    assert a.verdict.reason.startswith("idea:order changes the summation order")
    assert camp.tabu() == {}


def test_toggles_switch_only_registered_ideas_and_knobs_keep_the_champions_ideas(tmp_path):
    from evo.search.evolutionary import Evolutionary
    from evo.search.outside import IdeaLayer

    cfg = load_config(write_config(tmp_path, 3, "ideas: {toggle: 1.0}\n"))
    book = {"a": idea_from("a", insert_before(ANCHOR, "#pragma unroll\n"))}
    inner = Evolutionary(FAM, cfg.geometries, {}, 1)
    layer = IdeaLayer(inner, FAM, cfg.geometries, book, cfg.ideas, 1, lambda g: SRC, out=lambda s: None)
    base = FAM.baseline()

    def att(i, genome, status, score, parent=None):
        return Attempt(
            i,
            "c",
            FAM.name,
            dict(genome),
            Genome(genome).key,
            parent_id=parent,
            verdict=Verdict(status, "perf", "r"),
            score=score,
        )

    atts = [att(0, base, BASELINE, 1.0)]
    p = layer.propose(atts, {base.key})
    assert p.genome == with_ideas(base, ["a"]) and p.origin.startswith("idea toggle on #0: +idea a")
    # An idea genome became champion: knob moves keep its ideas; the knob proposer never sees idea genes.
    champ = with_ideas(base, ["a"])
    atts.append(att(1, champ, ACCEPTED, 1.1, 0))
    layer.settings = dataclasses.replace(cfg.ideas, toggle=0.0)
    seen = {a.genome_key for a in atts}
    for _ in range(20):
        p = layer.propose(atts, seen)
        assert idea_slugs(p.genome) == ["a"] and p.genome.key not in seen and "(with ideas a)" in p.origin
        assert FAM.check(p.genome, cfg.geometries) is None
        seen.add(p.genome.key)
    # No ideas anywhere: the layer hands the knob proposer's answer through untouched.
    plain = IdeaLayer(Evolutionary(FAM, cfg.geometries, {}, 5), FAM, cfg.geometries, {}, None, 5, lambda g: SRC)
    ref = Evolutionary(FAM, cfg.geometries, {}, 5)
    a0 = [att(0, base, BASELINE, 1.0)]
    assert plain.propose(a0, {base.key}).genome == ref.propose(a0, {base.key}).genome


# ---------------------------------------------------------------------------
# the outside proposer


SCRIPT = (
    textwrap.dedent("""
    import difflib, json, os, subprocess, sys, time
    state = sys.argv[1]
    modes = sys.argv[2].split(",")
    n = int(open(state).read()) if os.path.exists(state) else 0
    open(state, "w").write(str(n + 1))
    mode = modes[n] if n < len(modes) else "none"
    req = json.load(sys.stdin)
    src = req["kernel_cu"]
    assert open("kernel.cu").read() == src and os.path.exists("resolved.cu") and req["history"]
    def diff(new):
        return "".join(difflib.unified_diff(src.splitlines(True), new.splitlines(True), "a/kernel.cu", "b/kernel.cu"))
    anchor = %r
    if mode == "garbage":
        print("Sure! Here is a faster kernel: just make it faster.")
    elif mode == "hang":
        child = subprocess.Popen(["sleep", "60"])
        open(state + ".child", "w").write(str(child.pid))
        time.sleep(60)
    elif mode == "fail":
        sys.stderr.write("proposer: out of tokens\\n")
        sys.exit(3)
    elif mode == "stale":
        print("Title: Stale\\nRationale: written for another file\\n\\n--- a/kernel.cu\\n+++ b/kernel.cu\\n"
              "@@ -1,2 +1,2 @@\\n // not in this file\\n-old\\n+new")
    elif mode == "broken":
        print("Title: Broken\\nRationale: does not compile\\nExact: yes\\n\\n" + diff(src + "\\nnot C++;\\n"))
    elif mode == "good":
        print(json.dumps({"title": "Unroll the stream loop", "rationale": "loads of the next trip in flight",
                          "exact": True, "patch": diff(src.replace(anchor, "#pragma unroll 3\\n" + anchor))}))
    elif mode == "dup":  # the change of the family's own idea unroll-stream-loop, under another title
        print("Title: Same as a registered idea\\nRationale: r\\n\\n"
              + diff(src.replace(anchor, "#pragma unroll 2\\n" + anchor)))
""")
    % ANCHOR
)


def outside_config(tmp_path: Path, modes: str, attempts: int, max_failures: int = 100, every: int = 1) -> Path:
    script = tmp_path / "proposer.py"
    script.write_text(SCRIPT)
    state = tmp_path / "state"
    extra = (
        f"ideas:\n  toggle: 0\n  proposer:\n    command: [python, '{script}', '{state}', '{modes}']\n"
        f"    every: {every}\n    timeout_s: 2\n    max_failures: {max_failures}\n"
    )
    return write_config(tmp_path, attempts, extra)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_outside_proposer_failures_are_verdicts_and_the_campaign_goes_on(tmp_path):
    path = outside_config(tmp_path, "garbage,hang,fail,stale,broken,good,dup", 11)
    out: list[str] = []
    camp = Campaign(load_config(path), out=out.append)
    s = camp.run()
    atts = camp.ledger.attempts()
    assert s.stopped.startswith("attempt budget reached (11/11)") and len(atts) == 11
    v = [(a.verdict.label(), a.verdict.reason) for a in atts[1:7]]
    assert v[0][0] == "error: proposer" and "not a unified diff" in v[0][1] and "Sure! Here is" in v[0][1]
    assert v[1] == ("error: proposer", "no answer within 2 s: the command was killed")
    assert v[2] == ("error: proposer", "the command exited with status 3: proposer: out of tokens")
    assert v[3][0] == "error: idea" and "does not apply to the champion's kernel.cu: hunk at kernel.cu:1" in v[3][1]
    assert v[4][0] == "error: compile" and "kernel.cu(" in v[4][1]
    assert v[5][0] == "error: not_recorded"
    for a in atts[1:7]:
        assert a.origin.startswith("outside proposer (proposer.py)") and a.parent_id == 0
    good = atts[6]
    slug = idea_slugs(good.genome)[0]
    assert slug.startswith("unroll-the-stream-loop-") and knob_part(good.genome) == FAM.baseline()
    assert camp.ledger.meta("ideas")[slug]["rationale"] == "loads of the next trip in flight"
    assert (camp.cfg.log_dir / "ideas" / f"{slug}.patch").is_file()
    assert any(n.startswith("answer change sha256: ") for n in good.notes)
    # The same change as a registered idea is that idea, not a new one.
    dup = atts[7]
    assert idea_slugs(dup.genome) == ["unroll-stream-loop"] and "same change as idea unroll-stream-loop" in dup.notes
    assert not any(k.startswith("same-as-a-registered-idea") for k in camp.ledger.meta("ideas"))
    # The hung command's whole process group was killed, its child included.
    assert _gone(int((tmp_path / "state.child").read_text()))
    # After the scripted answers it says nothing: the knob proposer made the remaining attempts.
    assert all(not a.origin.startswith("outside") for a in atts[8:])
    assert sum("no idea this time" in line for line in out) >= 1
    # The log's rejected ideas name the failed answers with their reasons.
    from evo.report.logmd import render_log

    md = render_log(atts, camp.ledger.all_meta())
    rej = md.split("## Rejected ideas")[1]
    assert "### Source-level ideas" in rej and "(outside answer)" in rej and "out of tokens" in rej
    assert "Stale" in rej and "written for another file" in rej


def test_outside_proposer_is_dropped_after_repeated_failures(tmp_path):
    path = outside_config(tmp_path, "garbage,garbage,garbage,garbage", 6, max_failures=2)
    out: list[str] = []
    camp = Campaign(load_config(path), out=out.append)
    camp.run()
    labels = [a.verdict.label() for a in camp.ledger.attempts()]
    assert labels[1:3] == ["error: proposer"] * 2 and "error: proposer" not in labels[3:]
    assert any("2 failed answers in a row; not asked again" in line for line in out)
    from evo.loop.replay import replay

    assert replay(Campaign(load_config(path), out=lambda s: None), gate="proposer") == []  # nothing to re-judge


def test_rule_based_proposer_answers_an_untried_idea_and_then_nothing():
    from evo.report.export import resolved_kernel
    from evo.search.outside import parse_answer, run_command

    req = {"kernel_cu": SRC, "resolved_cu": resolved_kernel(FAM, FAM.baseline()), "tried_change_sha256": []}
    cmd = [sys.executable, "-m", "evo.search.rules"]
    ans = parse_answer(run_command(cmd, req, {"kernel.cu": SRC}, 60))
    assert ans is not None and ans.title and ans.rationale and ans.exact
    assert apply_patch(SRC, normalize_patch(ans.patch)) != SRC
    tried: list[str] = []
    for _ in range(40):
        req["tried_change_sha256"] = tried
        ans = parse_answer(run_command(cmd, req, {"kernel.cu": SRC}, 60))
        if ans is None:
            break
        tried.append(change_signature(normalize_patch(ans.patch)))
    assert ans is None and len(tried) >= 3


def test_rule_based_proposer_marked_interchange_and_widen():
    from evo.search.rules import propose

    src = textwrap.dedent("""\
        typedef uint2 vec_t;  // evo-rule: widen uint2 uint4
        __global__ void __launch_bounds__(256, 8) k(float* x) {
          // evo-rule: interchange
          for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < N; ++j) {
              x[j * 4 + i] = 0.0f;
            }
          }
        }
        """)
    edit, patch = propose(src)
    assert edit.rule == "interchange"
    new = apply_patch(src, patch)
    assert "  for (int j = 0; j < N; ++j) {\n    for (int i = 0; i < 4; ++i) {" in new
    edit, patch = propose(src, tried={change_signature(patch)})
    assert edit.rule == "widen" and "typedef uint4 vec_t;  // evo-rule: widen uint2 uint4" in apply_patch(src, patch)


# ---------------------------------------------------------------------------
# the CLI


def evo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run(
        [sys.executable, "-m", "evo", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def one_line_error(r: subprocess.CompletedProcess, expect: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evo: ") and expect in lines[0], r.stderr
    assert "Traceback" not in r.stdout + r.stderr


@pytest.fixture
def candidates(tmp_path):
    import shutil

    root = tmp_path / "candidates"
    shutil.copytree(FAM.folder, root / FAM.name, ignore=shutil.ignore_patterns("ideas", "__pycache__"))
    return root


def test_idea_add_accepts_a_good_patch_and_refuses_bad_ones(tmp_path, candidates):
    good = tmp_path / "cols.patch"
    good.write_text(
        "Title: Unroll the stream loop\nRationale: registers\n\n"
        + make_patch(SRC, insert_before(ANCHOR, "#pragma unroll\n"))
    )
    r = evo("idea", "add", FAM.name, str(good), "--candidates", str(candidates))
    assert r.returncode == 0, r.stderr
    assert "idea cols registered" in r.stdout and "applies to kernel.cu and compiles" in r.stdout
    written = candidates / FAM.name / "ideas" / "cols.patch"
    assert parse_idea(written.read_text(), slug="cols").patch == parse_idea(good.read_text(), slug="x").patch

    one_line_error(evo("idea", "add", FAM.name, str(good), "--candidates", str(candidates)), "already registered")
    stale = tmp_path / "stale.patch"
    stale.write_text("Title: t\nRationale: r\n\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n")
    one_line_error(
        evo("idea", "add", FAM.name, str(stale), "--candidates", str(candidates)),
        "idea stale refused: does not apply to",
    )
    broken = tmp_path / "broken.patch"
    broken.write_text("Title: t\nRationale: r\n\n" + make_patch(SRC, SRC + "\nnot C++;\n"))
    one_line_error(
        evo("idea", "add", FAM.name, str(broken), "--candidates", str(candidates)),
        "idea broken refused: does not compile: compile error: kernel.cu(",
    )
    garbage = tmp_path / "garbage.patch"
    garbage.write_text("Title: t\nRationale: r\n\nmake it faster\n")
    one_line_error(evo("idea", "add", FAM.name, str(garbage), "--candidates", str(candidates)), "not a unified diff")
    one_line_error(evo("idea", "add", "nosuch", str(good)), "unknown family 'nosuch'")
    assert sorted(p.name for p in (candidates / FAM.name / "ideas").glob("*.patch")) == ["cols.patch"]


def test_evo_ideas_lists_history_across_campaigns(tmp_path):
    path = outside_config(tmp_path, "fail,good", 4)
    camp = Campaign(load_config(path), out=lambda s: None)
    camp.run()
    r = evo("ideas", FAM.name, "--storage", camp.cfg.storage)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "register-slice" in text and "never tried" in text  # the folder's ideas
    assert "made by campaigns" in text and "Unroll the stream loop" in text
    assert "tried 1x, accepted 0x" in text and "error: not_recorded" in text
    assert "outside answers that did not become ideas" in text and "out of tokens" in text
    one_line_error(evo("ideas", FAM.name, "--storage", f"sqlite:///{tmp_path / 'none.db'}"), "no such ledger")


def test_config_ideas_section_is_checked(tmp_path):
    with pytest.raises(ConfigError, match=r"ideas.proposer.command: give the command as a list"):
        load_config(write_config(tmp_path, 3, "ideas: {proposer: {command: 'python x.py'}}\n"))
    with pytest.raises(ConfigError, match=r"ideas.nope: unknown key"):
        load_config(write_config(tmp_path, 3, "ideas: {nope: 1}\n"))
    with pytest.raises(ConfigError, match=r"ideas.toggle: 2.0 is out of range"):
        load_config(write_config(tmp_path, 3, "ideas: {toggle: 2}\n"))
    cfg = load_config(write_config(tmp_path, 3, "ideas:\n"))
    assert cfg.ideas is not None and cfg.ideas.toggle == 0.2 and cfg.ideas.proposer is None
    assert load_config(write_config(tmp_path, 3)).ideas is None


def test_resume_accepts_new_ideas_and_refuses_a_measured_idea_that_changed(tmp_path, candidates, monkeypatch):
    fam = load_family(FAM.name, candidates)
    (fam.folder / "ideas").mkdir()
    idea = idea_from("cols", insert_before(ANCHOR, "#pragma unroll\n"))
    (fam.folder / "ideas" / "cols.patch").write_text(idea.text())
    cfg = load_config(write_config(tmp_path, 4, "ideas: {toggle: 0}\n"))
    cfg.family = fam
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    assert "cols" in camp.ledger.meta("ideas")
    # A new idea: accepted on resume.
    other = idea_from("sink", insert_before(ANCHOR, "#pragma unroll 2\n"))
    (fam.folder / "ideas" / "sink.patch").write_text(other.text())
    camp = Campaign(cfg, out=lambda s: None)
    camp.setup()
    assert {"cols", "sink"} <= set(camp.ledger.meta("ideas"))
    camp.evaluate(Proposal(with_ideas(fam.baseline(), ["cols"]), "test"))
    # Once measured, its text may not change under the same name.
    (fam.folder / "ideas" / "cols.patch").write_text(dataclasses.replace(idea, patch=other.patch).text())
    with pytest.raises(CampaignError, match="idea.s. cols changed"):
        Campaign(cfg, out=lambda s: None).setup()


# ---------------------------------------------------------------------------
# export and the log


def _hand_campaign() -> tuple[list[Attempt], dict]:
    book, _ = load_folder_ideas(FAM)
    base = FAM.baseline()
    iv = Interval(1.2, 1.19, 1.21, 0.95, 12)
    t = Timing(40.0, 1.0, 12, 0, "m")

    def att(i, genome, verdict, parent=None, **kw):
        return Attempt(
            i,
            "hand",
            FAM.name,
            dict(genome),
            Genome(genome).key,
            origin=kw.pop("origin", "test"),
            parent_id=parent,
            backend="gpu",
            verdict=verdict,
            finished_at="2026-11-30T12:00:00+00:00",
            **kw,
        )

    step = with_ideas(base, ["register-slice"])
    atts = [
        att(0, base, Verdict(BASELINE, None, "baseline"), timings={"T4096_H4096": t}, score=1.0),
        att(
            1,
            step,
            Verdict.accepted("faster"),
            0,
            timings={"T4096_H4096": t},
            speedup_vs_parent={"T4096_H4096": iv},
            speedup_vs_baseline={"T4096_H4096": iv},
            score=1.2,
            origin="idea toggle on #0: +idea register-slice",
        ),
        att(
            2,
            toggled(step, "unroll-split-sum"),
            Verdict.error("idea", "ideas register-slice and unroll-split-sum do not apply together: ..."),
            1,
        ),
        att(
            3,
            step,
            Verdict.error("proposer", "no answer within 2 s: the command was killed", "proposer"),
            1,
            origin="outside proposer (x): no patch",
            notes=["answer: no answer within 2 s: the command was killed"],
        ),
    ]
    meta = {
        "config": {"campaign": "hand", "family": FAM.name, "geometries": [{"name": "T4096_H4096", "weight": 1.0}]},
        "ideas": {s: i.to_record() for s, i in book.items()},
        "baseline_id": 0,
    }
    return atts, meta


def test_export_carries_the_ideas_rationale_and_code(tmp_path):
    from evo.report.export import export

    atts, meta = _hand_campaign()
    out = tmp_path / "export"
    patches = export(FAM, atts, meta, out)
    assert len(patches) == 1
    text = patches[0].read_text()
    assert "Subject: [PATCH] mhc_pre_big_fuse: Register slice of the array form" in text
    assert "- idea register-slice: Register slice of the array form" in text
    assert "Rationale: In the array form each of lanes 0..3 reads" in text
    assert "+          for (int k = 0; k < HC; ++k) cmv[k] = y_local[2 * HC + j * HC + k];" in text
    final = (out / f"{FAM.name}.cu").read_text()
    assert "if (lane == j)" in final and "EVO_META_ARRAY" not in final
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
    }

    def git(*a):
        return subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, text=True, env=env)

    git("init", "-q")
    (repo / f"{FAM.name}.cu").write_text((out / f"baseline-{FAM.name}.cu").read_text())
    git("add", ".")
    git("commit", "-q", "-m", "baseline")
    git("am", str(patches[0]))
    assert (repo / f"{FAM.name}.cu").read_text() == final


def test_exported_idea_step_compiles_to_the_built_machine_code():
    from evo.report.export import idea_book, step_source
    from harness.build import compile_source, resolve_source, sass_digest

    atts, meta = _hand_campaign()
    g, spec = atts[1].genome, {"S": 1, "prenorm": False}
    book = idea_book(FAM, meta)
    ref, _, _ = compile_source(resolve_source(FAM, g, spec, apply_ideas(SRC, g, book)), FAM.entry, "sm_90")
    spec_defs = "".join(f"#define EVO_{k.upper()} {int(v)}\n" for k, v in spec.items())
    mine, _, _ = compile_source(spec_defs + step_source(FAM, g, book), FAM.entry, "sm_90")
    assert sass_digest(mine) == sass_digest(ref)


def test_log_lists_rejected_ideas_with_their_rationale():
    from evo.report.logmd import render_log

    atts, meta = _hand_campaign()
    md = render_log(atts, meta)
    assert "| 1 | #1 | T4096_H4096 | +idea register-slice |" in md
    rej = md.split("## Rejected ideas")[1]
    assert "| +idea unroll-split-sum | 1 | error: idea ×1 |" in rej
    src = rej.split("### Source-level ideas")[1]
    assert "| unroll-split-sum | #pragma unroll 4 on the split-partials loop of the array form |" in src
    assert "At decode shapes" in src and "do not apply together" in src
    assert "| (outside answer) |" in src and "no answer within 2 s" in src


# ---------------------------------------------------------------------------
# on a GPU: an idea that computes the wrong result


@pytest.mark.gpu
def test_wrong_result_idea_is_rejected_by_correctness_on_the_gpu(tmp_path):
    text = SHIPPED.read_text()
    text = re.sub(r"^budget: .*$", "budget: {attempts: 6}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: gpu", text, flags=re.M)
    text = re.sub(r"^peer: .*$", "peer: {torch_compile: 'off'}", text, flags=re.M)
    text = re.sub(r"aa_rounds: \d+", "aa_rounds: 20", text)
    path = tmp_path / "gpu.yaml"
    path.write_text(text + f"storage: sqlite:///{tmp_path / 'gpu.db'}\nideas: {{toggle: 0}}\n")
    camp = Campaign(load_config(path), out=lambda s: None)
    camp.setup()
    old, new = FAM.faults["wrong index: residual row read one vector off"]
    camp.ideas["off-by-one"] = Idea(
        "off-by-one", "Read the residual one vector off", "a deliberate bug", make_patch(SRC, SRC.replace(old, new))
    )
    wrong = camp.evaluate(Proposal(with_ideas(FAM.baseline(), ["off-by-one"]), "test: wrong result"))
    assert wrong.verdict.label() == "rejected: correctness", wrong.verdict
    assert "layer_input" in wrong.verdict.reason
    book, _ = load_folder_ideas(FAM)
    camp.ideas.update(book)
    good = camp.evaluate(Proposal(with_ideas(FAM.baseline(), ["register-slice"]), "test: register slice"))
    assert good.verdict.gate != "correctness" and good.verdict.kind != "not_recorded", good.verdict
    assert good.timings  # it was measured: the bits matched the frozen baseline's
