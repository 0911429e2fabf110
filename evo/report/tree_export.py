"""`evo export --tree`: the export's series again, as patches to the family's own files in the user's repository.

The resolved series (evo/report/export.py) applies to the exported ``baseline-<family>.cu``, every knob ``#if``
resolved.
The tree series applies with ``git am`` in the repository that holds the family folder, to its ``kernel.cu`` and
``family.py`` as they are now:

- ``kernel.cu``: the step's ideas applied (evo/ideas.py), and each knob macro's default set to the step's value: a
  ``#ifndef EVO_X`` / ``#define EVO_X v`` / ``#endif`` block gets the new ``v``; a knob macro the kernel reads and
  has no such block for gets one, after the kernel's own default blocks (else after its header comment), so the
  harness's macros still override it. A string-valued knob is written as the family's value constant
  (``EVO_META_SLICE``), whose numbers go into the block when the kernel does not define them. Macros the family
  derives from the geometry or sets per specialization are left as they are.
- ``family.py``: the ``default`` of each knob's ``Knob(...)`` call set to the step's value (found with ``ast``:
  the call of ``Knob`` whose first argument is the knob's name; only the default's own text is replaced). A knob
  whose call cannot be found (a computed name, knobs made in a loop, a family.py that takes them from elsewhere)
  fails the export in one line naming it: a series that moved kernel.cu's defaults but not family.py's would leave
  the family's baseline, and every template-parameter knob, where it was.

Each commit carries the resolved series' message (:func:`evo.report.export.commit_message`). When the tree's
files are not what the campaign measured (:func:`tree_differences`), every message and the command's output say so.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.core.family import Family
from evo.core.records import ACCEPTED, BASELINE, Attempt
from evo.report.export import ExportError, _git, commit_message, geometry_free_defines, idea_book, lasting_series

TREE_DIR = "tree"  # the export folder's subfolder for the tree series

_IFNDEF = re.compile(r"^\s*#\s*(?:ifndef\s+(\w+)|if\s+!\s*defined\s*\(?\s*(\w+)\s*\)?)\s*(?://.*|/\*.*)?$")
_OPEN = re.compile(r"^\s*#\s*if(?:n?def)?\b")
_ENDIF = re.compile(r"^\s*#\s*endif\b")


class TreeError(ExportError):
    """The tree series cannot be written (one line; nothing is written)."""


# ---------------------------------------------------------------------------
# kernel.cu: knob macro defaults


def _code(line: str) -> str:
    """A line without its // comment (block comments are dropped by :func:`_strip_comments`)."""
    return line.split("//", 1)[0]


def _strip_comments(source: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), source, flags=re.S))


@dataclass
class _Block:
    macro: str
    start: int  # line index of the #ifndef
    end: int  # line index of its #endif
    top: bool  # not inside another conditional


def _default_blocks(lines: Sequence[str]) -> list[_Block]:
    """Every ``#ifndef EVO_X ... #endif`` (or ``#if !defined(EVO_X)``) block of the kernel."""
    out: list[_Block] = []
    stack: list[tuple[str | None, int]] = []
    for i, ln in enumerate(lines):
        m = _IFNDEF.match(ln)
        if m:
            stack.append((m.group(1) or m.group(2), i))
        elif _OPEN.match(ln):
            stack.append((None, i))
        elif _ENDIF.match(ln) and stack:
            name, start = stack.pop()
            if name is not None and name.startswith("EVO_"):
                out.append(_Block(name, start, i, not stack))
    return sorted(out, key=lambda b: b.start)


def _define_re(macro: str) -> re.Pattern[str]:
    return re.compile(rf"^(\s*#\s*define\s+{macro})(\s+)(.*?)(\s*(?://.*|/\*.*)?)(\r?\n?)$")


def _defined(source: str, macro: str) -> bool:
    return re.search(rf"^\s*#\s*define\s+{macro}\b", source, re.M) is not None


def _insert_at(lines: Sequence[str], blocks: Sequence[_Block], macros: Sequence[str]) -> int:
    """Where new default blocks go: after the first run of the kernel's own top-level default blocks, when no new
    macro is read before that; else after the file's header comment (blank and comment lines at the top)."""
    top = [b for b in blocks if b.top]
    if top:
        end = top[0].end
        for b in top[1:]:
            if all(not _code(ln).strip() for ln in lines[end + 1 : b.start]):
                end = b.end
        before = _strip_comments("".join(lines[: end + 1]))
        if not any(re.search(rf"\b{m}\b", before) for m in macros):
            return end + 1
    i, in_block = 0, False
    while i < len(lines):
        s = lines[i].strip()
        if in_block:
            in_block = "*/" not in s
        elif s.startswith("/*"):
            in_block = "*/" not in s[2:]
        elif s and not s.startswith("//"):
            break
        i += 1
    return i


def set_macro_defaults(source: str, values: Mapping[str, str], constants: Mapping[str, Mapping[str, int]]) -> str:
    """``source`` with each macro of ``values`` (name -> the text its ``#define`` gets) defaulting to that value.

    An existing ``#ifndef`` block has its ``#define`` line's value replaced (its comment and spacing kept); a macro
    without one gets a new block. ``constants``: for a macro whose value is a value constant (``EVO_META_SLICE``),
    the constants of its knob (name -> number); those the kernel does not ``#define`` itself are written into the
    block before the default, so the kernel compiles on its own as the harness compiles it."""
    nl = "\r\n" if "\r\n" in source else "\n"
    lines = source.splitlines(keepends=True)
    blocks = _default_blocks(lines)
    edits: dict[int, str] = {}  # line index -> replacement text
    missing: list[str] = []
    for macro, value in values.items():
        mine = [b for b in blocks if b.macro == macro]
        if not mine:
            missing.append(macro)
            continue
        pat = _define_re(macro)
        for b in mine:
            hit = next((i for i in range(b.start + 1, b.end) if pat.match(lines[i])), None)
            if hit is None:
                raise TreeError(f"kernel.cu line {b.start + 1}: its #ifndef {macro} block does not #define {macro}")
            m = pat.match(lines[hit])
            assert m is not None
            consts = "".join(
                f"#define {c} {n}{nl}" for c, n in (constants.get(macro) or {}).items() if not _defined(source, c)
            )
            edits[hit] = consts + m.group(1) + m.group(2) + value + m.group(4) + (m.group(5) or "")
    for i, text in edits.items():
        lines[i] = text
    if missing:
        at = _insert_at(lines, blocks, missing)
        new = [nl] if at > 0 and lines[at - 1].strip() else []
        new.append(f"// evo export --tree: knob defaults (the harness's EVO_<KNOB> macros override them){nl}")
        for macro in missing:
            new.append(f"#ifndef {macro}{nl}")
            new += [f"#define {c} {n}{nl}" for c, n in (constants.get(macro) or {}).items() if not _defined(source, c)]
            new += [f"#define {macro} {values[macro]}{nl}", f"#endif{nl}"]
        if at > 0 and not lines[at - 1].endswith("\n"):
            lines[at - 1] += nl
        lines[at:at] = new
    return "".join(lines)


def kernel_defaults(
    family: Family, genome: Mapping[str, Any], source: str, specs: Sequence[Mapping[str, Any]] = ()
) -> tuple[dict[str, str], dict[str, dict[str, int]], list[str]]:
    """(macro -> default text, macro -> its value constants, notes) for the knob macros ``source`` reads.

    A knob's macro is what :meth:`Family.defines` gives it (one value at every specialization of the campaign); one
    that differs between specializations is left alone and named in the notes. A knob whose macro the kernel never
    reads (a template parameter) has nothing here: family.py's default carries it."""
    from evo.core.family import _ident

    free = geometry_free_defines(family, genome, specs)
    code = _strip_comments(source)
    consts_all = family.value_macros()
    values: dict[str, str] = {}
    consts: dict[str, dict[str, int]] = {}
    notes: list[str] = []
    for k in family.knobs:
        macro = f"EVO_{k.name.upper()}"
        if not re.search(rf"\b{macro}\b", code):
            continue
        if macro not in free:
            notes.append(f"{macro} is not one value at every geometry of the campaign: kernel.cu's default stays")
            continue
        v = free[macro]
        values[macro] = str(int(v)) if isinstance(v, bool) else str(v)
        if isinstance(v, str) and v in consts_all:
            names = [f"{macro}_{_ident(str(x))}" for x in k.values]
            consts[macro] = {n: consts_all[n] for n in names if n in consts_all}
    return values, consts, notes


# ---------------------------------------------------------------------------
# family.py: Knob(...) defaults


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _offset(lines: Sequence[str], lineno: int, col: int) -> int:
    """A character offset into the text of ``lines`` from ast's (1-based line, UTF-8 byte column)."""
    return sum(len(x) for x in lines[: lineno - 1]) + len(lines[lineno - 1].encode()[:col].decode())


def _literal(value: Any, old: str) -> str:
    if isinstance(value, str):
        if old[:1] == "'" and '"' not in value and "'" not in value and "\\" not in value:
            return f"'{value}'"
        return json.dumps(value)
    return repr(value)


def set_knob_defaults(text: str, values: Mapping[str, Any], where: str = "family.py") -> str:
    """``text`` (a family.py) with the ``default`` of each knob's ``Knob(...)`` call set to ``values[name]``.

    The call: a ``Knob(...)`` (or ``x.Knob(...)``) whose name, its first argument or ``name=``, is the literal knob
    name; its default is the third positional argument or ``default=``. Only that argument's text changes, and only
    when its value differs. Raises TreeError (one line, naming the knob) when a knob has no such call, or several."""
    tree = ast.parse(text)
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _callee(node.func) == "Knob"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        name_node = node.args[0] if node.args else kw.get("name")
        if not (isinstance(name_node, ast.Constant) and isinstance(name_node.value, str)):
            continue
        default = node.args[2] if len(node.args) > 2 else kw.get("default")
        if default is not None:
            found.setdefault(name_node.value, []).append(default)
    lines = text.splitlines(keepends=True)
    spans: list[tuple[int, int, str]] = []
    for name, value in values.items():
        nodes = found.get(name, [])
        if len(nodes) != 1:
            why = "no Knob(" if not nodes else f"{len(nodes)} Knob("
            raise TreeError(
                f"{where}: {why}{name!r}, ...) call with a default to set (a computed name, knobs made in a loop or "
                f"taken from another file); knob {name}'s default cannot be written: export without --tree"
            )
        node = nodes[0]
        assert node.end_lineno is not None and node.end_col_offset is not None
        a, b = _offset(lines, node.lineno, node.col_offset), _offset(lines, node.end_lineno, node.end_col_offset)
        old = text[a:b]
        try:
            same = ast.literal_eval(old) == value and type(ast.literal_eval(old)) is type(value)
        except (ValueError, SyntaxError):
            same = False
        if not same:
            spans.append((a, b, _literal(value, old)))
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


# ---------------------------------------------------------------------------
# Where the files are, and whether they are what was measured


@dataclass
class TreePaths:
    root: Path  # the paths in the patches are relative to this
    in_git: bool  # root is the git top level of the family folder (else the folder's parent)
    kernel: str  # kernel.cu, relative to root (posix)
    family_py: str  # family.py, relative to root


def tree_paths(family: Family) -> TreePaths:
    folder = Path(family.folder).resolve()
    try:
        top = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
        )
        in_git = top.returncode == 0 and bool(top.stdout.strip())
    except FileNotFoundError:
        raise TreeError("git is not on the PATH; evo export --tree makes the series with git") from None
    root = Path(top.stdout.strip()).resolve() if in_git else folder.parent
    rels = []
    for p in (Path(family.kernel_path).resolve(), folder / "family.py"):
        if not p.is_file():
            raise TreeError(f"{p} is not a file: the tree series patches the family's kernel.cu and family.py")
        try:
            rels.append(p.relative_to(root).as_posix())
        except ValueError:
            raise TreeError(f"{p} lies outside {root}, where the tree series' paths start") from None
    return TreePaths(root, in_git, rels[0], rels[1])


def tree_differences(cfg: Any, base: Attempt) -> list[str]:
    """How the family's files today differ from what the campaign measured as its baseline ``base`` ([] when not).

    family.py's knob defaults against the baseline's genome; the source the harness builds for the baseline's
    genome today (kernel.cu, the headers it includes, family.py's macros: what evo/measure/sanitize.py's
    ``source_matches`` compares) against the baseline attempt's recorded ``source_sha256``."""
    from evo.search.ideas import knob_part
    from harness.build import Builder, BuildError

    fam = cfg.family
    out = []
    measured = knob_part(base.genome)
    now = fam.baseline()
    diff = [
        f"{k} {measured.get(k)!r} then, {now.get(k)!r} now"
        for k in sorted({*measured, *now})
        if measured.get(k) != now.get(k)
    ]
    if diff:
        out.append(f"family.py's knob defaults are not those of the measured baseline #{base.id}: {'; '.join(diff)}")
    if not base.source_sha256:
        out.append(f"the ledger holds no source hash of baseline #{base.id}: kernel.cu could not be compared")
        return out
    try:
        built = Builder.for_config(cfg).build(dict(base.genome))
    except (BuildError, ValueError, KeyError) as e:
        out.append(f"baseline #{base.id} does not build from today's files ({' '.join(str(e).split())[:200]})")
        return out
    if built.source_sha256 != base.source_sha256:
        out.append(
            f"the source of baseline #{base.id} built from today's files differs from the one measured "
            "(kernel.cu, a header it includes or family.py's macros changed since)"
        )
    return out


# ---------------------------------------------------------------------------
# The series


@dataclass
class TreeSeries:
    paths: TreePaths
    files: dict[str, str] = field(default_factory=dict)  # name under the export folder -> patch text
    notes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def patches(self) -> list[str]:
        return sorted(self.files)


def step_files(
    family: Family,
    genome: Mapping[str, Any],
    book: Mapping[str, Any],
    kernel: str,
    family_py: str,
    specs: Sequence[Mapping[str, Any]] = (),
    notes: list[str] | None = None,
    where: str = "family.py",
) -> tuple[str, str]:
    """(kernel.cu, family.py) as they are with ``genome`` as the family's defaults (``kernel``, ``family_py``: their
    text now). Raises TreeError (an idea that no longer applies, a knob whose default cannot be written)."""
    from evo.search.ideas import IdeaError, apply_ideas, idea_slugs, knob_part

    src = kernel
    if idea_slugs(genome):
        try:
            src = apply_ideas(src, genome, book)
        except IdeaError as e:
            raise TreeError(f"cannot write the tree series: {e}") from None
    knobs = knob_part(genome)
    for k, v in knobs.items():
        try:
            ok = v in family.knob(k).values
        except KeyError:
            raise TreeError(f"knob {k} of the campaign is no knob of family.py today") from None
        if not ok:
            raise TreeError(f"knob {k}: the value {v!r} is not among family.py's values today")
    values, consts, why = kernel_defaults(family, knobs, src, specs)
    if notes is not None:
        notes += [n for n in why if n not in notes]
    return set_macro_defaults(src, values, consts), set_knob_defaults(family_py, dict(knobs), where)


def _caveat(differences: Sequence[str]) -> str:
    import textwrap

    lines = ["", "Caveat: the family's files this patch applies to are not what the campaign measured:"]
    for d in differences:
        lines += textwrap.wrap(d, 70, initial_indent="- ", subsequent_indent="  ")
    lines += textwrap.wrap(
        "The patch sets the measured knob values and ideas on today's files; the figures above are of the measured "
        "source (the resolved series in the export folder is that source).",
        72,
    )
    return "\n".join(lines) + "\n"


def tree_series(
    family: Family,
    attempts: Sequence[Attempt],
    meta: Mapping[str, Any],
    specs: Sequence[Mapping[str, Any]] = (),
    differences: Sequence[str] = (),
) -> TreeSeries:
    """The tree series of a campaign: one patch per lasting change (:func:`evo.report.export.lasting_series`), against
    the family's kernel.cu and family.py as they are now, as {``tree/NNNN-subject.patch``: text}.

    ``differences``: what :func:`tree_differences` found; each commit message then carries them. Raises TreeError
    (before anything is written) when a step cannot be written onto today's files."""
    paths = tree_paths(family)
    base = next((a for a in attempts if a.verdict.status == BASELINE), None)
    if base is None:
        raise TreeError("the campaign has no baseline attempt yet")
    chain = [base] + sorted((a for a in attempts if a.verdict.status == ACCEPTED), key=lambda a: a.id)
    book = idea_book(family, meta)
    kernel_now = paths.root.joinpath(paths.kernel).read_bytes().decode()
    family_now = paths.root.joinpath(paths.family_py).read_bytes().decode()
    out = TreeSeries(paths, differences=list(differences))
    texts = {
        a.id: step_files(family, a.genome, book, kernel_now, family_now, specs, out.notes, paths.family_py)
        for a in chain
    }
    with tempfile.TemporaryDirectory() as td:
        repo, staged = Path(td) / "repo", Path(td) / "out"
        repo.mkdir()
        _git(repo, "init", "-q")

        def write(kernel: str, fam: str) -> None:
            for rel, text in ((paths.kernel, kernel), (paths.family_py, fam)):
                (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                (repo / rel).write_bytes(text.encode())
            _git(repo, "add", "--", paths.kernel, paths.family_py)

        write(kernel_now, family_now)
        date = base.finished_at or base.started_at or "2000-01-01T00:00:00+00:00"
        stamp = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"{family.name}: the tree as it is", env=stamp)
        prev, step, commits = (kernel_now, family_now), 0, 0
        prev_a = base
        for group in lasting_series(base, chain[1:]):
            a = group[-1]
            if texts[a.id] == prev:
                out.notes.append(f"attempt #{a.id} leaves the tree's files as they are: no tree patch for it")
                continue
            step += 1
            write(*texts[a.id])
            msg = commit_message(family, step, a, prev_a, meta, book, group, chain[-1].id)
            if differences:
                msg += _caveat(differences)
            when = a.finished_at or date
            _git(repo, "commit", "-q", "-F", "-", stdin=msg, env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
            prev, prev_a, commits = texts[a.id], a, commits + 1
        if commits:
            staged.mkdir()
            _git(repo, "format-patch", "-q", "-o", str(staged), f"HEAD~{commits}")
            out.files = {f"{TREE_DIR}/{p.name}": p.read_bytes().decode() for p in sorted(staged.iterdir())}
    if paths.in_git:
        dirty = subprocess.run(
            ["git", "-C", str(paths.root), "status", "--porcelain", "--", paths.kernel, paths.family_py],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if dirty:
            out.notes.append(
                f"{paths.kernel} or {paths.family_py} has changes not committed in {paths.root}: the tree series is "
                "made against the files as they are; commit them first for git am (git apply takes them as they are)"
            )
    return out


def print_tree_summary(series: TreeSeries, out_dir: Path, print_: Any = print) -> None:
    """What `evo export --tree` tells the user: where the series is, what it applies to and how, and any warning."""
    p = series.paths
    for note in series.notes:
        print_(f"evo: note: tree: {note}")
    for d in series.differences:
        print_(f"evo: WARNING: tree: not what the campaign measured: {d} (said in every tree commit message)")
    files = f"{p.kernel} and {p.family_py}"
    if not series.files:
        print_(f"evo: tree: no step changes {files}: no tree patch written")
        return
    print_(f"evo: tree: {len(series.files)} patch(es) against {files} as they are now, in {out_dir / TREE_DIR}")
    if p.in_git:
        print_(
            f"evo: tree: paths relative to the git top level {p.root}; apply with: "
            f"git -C {p.root} am {out_dir / TREE_DIR}/*.patch"
        )
    else:
        print_(
            f"evo: tree: the family folder is in no git repository: paths relative to its parent {p.root}; apply "
            f"with: cd {p.root} && git apply {out_dir / TREE_DIR}/*.patch"
        )
