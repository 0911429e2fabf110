"""Source-level ideas: unified-diff patches against a family's ``kernel.cu``, carried in genomes as genes.

An idea is a file ``candidates/<family>/ideas/<slug>.patch``: a few header
lines, then a unified diff against the family's ``kernel.cu`` (the baseline
source, knob conditionals and all)::

    Title: Register slice instead of a lane-indexed array
    Rationale: y_local[lane] is indexed at run time, so the 24 floats live in
      local memory; picking the slice with compile-time indices keeps them in
      registers (continuation lines start with white space).
    Exact: yes

    --- a/kernel.cu
    +++ b/kernel.cu
    @@ -251,7 +251,13 @@
    ...

``Exact: no`` says the change may alter output bits (a different summation
order); in exact mode such an idea is rejected without being measured. Text
between the headers and the diff is ignored.

Genes. A genome stays knob -> value; an idea that is switched on is the extra
key ``idea:<slug>`` = True, and an idea that is off is absent. So knob
genomes, their keys, the recorded sweeps and the Optuna distributions do not
change, and a resumed campaign accepts new ideas while it still refuses a
changed knob space. The builder applies a genome's ideas in slug order with
``git apply`` before the knob macros are prepended (:meth:`harness.build.Builder.source_for`).

Failures are verdicts, never crashes: an unknown idea, one that no longer
applies to ``kernel.cu`` and two that do not apply together raise
:class:`IdeaError`, which the campaign records as ``error: idea`` with the
failing hunk in the reason; one that does not compile is ``error: compile``.

Every idea a campaign uses is frozen into its ledger (study meta ``ideas``:
slug -> title, rationale, exact, patch, origin), in the same transaction as
the first attempt that uses it, so export, the log and `evo ideas` read the
text that was measured even after the folder changed.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.core.family import Family
from evo.core.genome import Genome
from harness.build import BuildError, PatchError, apply_patch

GENE_PREFIX = "idea:"
TARGET = "kernel.cu"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
HEADER_RE = re.compile(r"^([A-Za-z][A-Za-z -]*):\s?(.*)$")
DIFF_START = ("diff --git ", "--- ")


class IdeaError(BuildError):
    """An idea cannot be used: unreadable, unknown, no longer applies, or conflicts with another (one line)."""

    kind, gate = "idea", "idea"


# ---------------------------------------------------------------------------
# The idea itself


@dataclass(frozen=True)
class Idea:
    slug: str
    title: str
    rationale: str
    patch: str  # a normalized unified diff against kernel.cu (a/kernel.cu -> b/kernel.cu), no headers
    exact: bool = True
    origin: str = "folder"  # folder | proposer (<command>) | cli
    path: str = ""  # where it was read from, if a file

    @property
    def gene(self) -> str:
        return GENE_PREFIX + self.slug

    @property
    def patch_sha256(self) -> str:
        return hashlib.sha256(self.patch.encode()).hexdigest()

    @property
    def change_sha256(self) -> str:
        return change_signature(self.patch)

    def text(self) -> str:
        """The file form: headers, a blank line, the diff."""
        rat = "\n  ".join(textwrap_lines(self.rationale, 100))
        return f"Title: {self.title}\nRationale: {rat}\nExact: {'yes' if self.exact else 'no'}\n\n" + self.patch

    def to_record(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "rationale": self.rationale,
            "exact": self.exact,
            "patch": self.patch,
            "origin": self.origin,
            "path": self.path,
            "patch_sha256": self.patch_sha256,
            "change_sha256": self.change_sha256,
        }

    @classmethod
    def from_record(cls, slug: str, d: Mapping[str, Any]) -> Idea:
        return cls(
            slug,
            str(d.get("title", slug)),
            str(d.get("rationale", "")),
            str(d.get("patch", "")),
            bool(d.get("exact", True)),
            str(d.get("origin", "ledger")),
            str(d.get("path", "")),
        )


def textwrap_lines(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(" ".join(text.split()), width) or [""]


def split_headers(text: str) -> tuple[dict[str, str], str]:
    """``Key: value`` lines at the top (continued by indented lines) and the diff from its first file header on.

    Returns ({lower-case key: value}, diff text or "").
    """
    headers: dict[str, str] = {}
    lines = text.splitlines(keepends=True)
    last: str | None = None
    in_headers = True
    for i, ln in enumerate(lines):
        if ln.startswith(DIFF_START):
            return headers, "".join(lines[i:])
        if not in_headers:
            continue
        if not ln.strip():
            in_headers = bool(not headers)  # a blank line ends the header block (leading blanks are skipped)
            last = None
            continue
        m = HEADER_RE.match(ln.rstrip("\n"))
        if ln[:1] in (" ", "\t") and last is not None:
            headers[last] = (headers[last] + " " + ln.strip()).strip()
        elif m and " " not in m.group(1).strip():
            last = m.group(1).strip().lower()
            headers[last] = m.group(2).strip()
        else:
            in_headers = False
    return headers, ""


def normalize_patch(diff: str, name: str = TARGET, aliases: tuple[str, ...] = ()) -> str:
    """One file's unified diff with its file names rewritten to a/kernel.cu and b/kernel.cu (``aliases``: other
    file names taken as that file).

    Raises IdeaError when the text holds no hunk, when it changes another file or more than one,
    or when it creates, deletes or renames a file. A ``--- `` line followed by a ``+++ `` line is a
    file header (so a removed line that starts with ``-- `` inside a hunk is left alone).
    """
    if not diff.strip():
        raise IdeaError(f"not a unified diff: no '--- a/{name}' / '+++ b/{name}' header found")
    out: list[str] = []
    headers = hunks = 0
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        ln = lines[i]
        body = ln.rstrip("\r\n")
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if body.startswith("```") and headers:
            break  # the end of a fenced block in a chat answer
        if body.startswith(("GIT binary patch", "Binary files ")):
            raise IdeaError(f"the patch holds a binary change; an idea may only change the text of {name}")
        if body.startswith("diff --git "):
            m = re.match(r"diff --git a/(\S+) b/(\S+)$", body)
            if m and any(p.split("/")[-1] not in (name, *aliases) for p in m.groups()):
                raise IdeaError(f"the patch changes {m.group(1)}; an idea may only change {name}")
            out.append(f"diff --git a/{name} b/{name}\n")
        elif body.startswith("--- ") and nxt.startswith("+++ "):
            for side, hdr in (("a", body), ("b", nxt.rstrip("\r\n"))):
                path = hdr[4:].split("\t")[0].strip()
                if path == "/dev/null":
                    raise IdeaError(f"the patch creates or deletes a file; an idea may only change {name}")
                if path.split("/")[-1] not in (name, *aliases):
                    raise IdeaError(f"the patch changes {path}; an idea may only change {name}")
                out.append(f"{hdr[:3]} {side}/{name}\n")
            headers += 1
            i += 1
        elif body.startswith(
            (
                "new file mode",
                "deleted file mode",
                "rename from",
                "rename to",
                "similarity index",
                "copy from",
                "copy to",
            )
        ):
            raise IdeaError(f"the patch renames, creates or deletes files; an idea may only change {name}")
        elif body.startswith("index ") and not hunks:
            pass  # blob ids of some other tree: meaningless here
        else:
            if body.startswith("@@"):
                if not headers:
                    raise IdeaError(f"not a unified diff: a hunk comes before the '--- a/{name}' header")
                if not re.match(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", body):
                    raise IdeaError(f"corrupt hunk header: {body[:80]!r}")
                hunks += 1
            if headers:
                out.append(body + "\n")
        i += 1
    if not headers:
        raise IdeaError(f"not a unified diff: no '--- a/{name}' / '+++ b/{name}' header found")
    if not hunks:
        raise IdeaError("not a unified diff: no hunk ('@@ -l,n +l,n @@') found")
    if headers > 1:
        raise IdeaError(f"the patch changes more than one file; an idea may only change {name}")
    while out and out[-1] == "\n":  # blank lines after the last hunk (print(), chat answers) are not context
        out.pop()
    return "".join(out)


def change_signature(patch: str) -> str:
    """sha256 of each run of removed and added lines with the one context line on either side of it.

    Line numbers and the wider context do not count, so the same change has the same signature
    whether it was written against the baseline or against a champion with other ideas applied.
    """
    h = hashlib.sha256()
    body: list[tuple[str, str]] = []
    in_hunk = False
    for ln in patch.splitlines():
        if ln.startswith("@@"):
            in_hunk = True
            body.append(("@", ""))
            continue
        if not in_hunk or ln.startswith("\\"):
            continue
        body.append((ln[:1] or " ", ln[1:].rstrip()))
    i = 0
    while i < len(body):
        if body[i][0] not in "+-":
            i += 1
            continue
        j = i
        while j < len(body) and body[j][0] in "+-":
            j += 1
        run = body[max(i - 1, 0) : min(j + 1, len(body))]
        h.update("\n".join(t + x for t, x in run if t != "@").encode() + b"\n\x00")
        i = j
    return h.hexdigest()


def slugify(title: str, suffix: str = "") -> str:
    s = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].strip("-") or "idea"
    return f"{s}-{suffix}" if suffix else s


def parse_idea(
    text: str,
    *,
    slug: str,
    origin: str = "folder",
    path: str = "",
    title: str | None = None,
    rationale: str | None = None,
    exact: bool | None = None,
    aliases: tuple[str, ...] = (),
) -> Idea:
    """Headers + diff -> Idea; arguments given here override the headers. Raises IdeaError. ``aliases``: other
    file names the diff may give the kernel (the file a linked kernel.cu points to, as ``git diff`` names it)."""
    if not SLUG_RE.match(slug):
        raise IdeaError(f"idea name {slug[:60]!r} is not allowed (lower-case letters, digits, . _ -; up to 80)")
    from evo.inputs import PATCH_LIMIT

    # every idea is stored in the ledger and rebuilt into kernels: text of a kernel change's size only
    if len(text.encode("utf-8", "replace")) > PATCH_LIMIT:
        raise IdeaError(
            f"the patch is {len(text.encode('utf-8', 'replace'))} bytes, more than the {PATCH_LIMIT} an idea may have"
        )
    if "\x00" in text or "\ufffd" in text:
        raise IdeaError("the patch is not text (a NUL byte, or bytes that are not UTF-8)")
    headers, diff = split_headers(text)
    t = title if title is not None else headers.get("title")
    r = rationale if rationale is not None else headers.get("rationale")
    if not t:
        raise IdeaError("the idea has no title (a 'Title: ...' line before the diff, or --title)")
    if not r:
        raise IdeaError("the idea has no rationale (a 'Rationale: ...' line before the diff, or --rationale)")
    if exact is None:
        ex = headers.get("exact", "yes").strip().lower()
        if ex not in ("yes", "no", "true", "false"):
            raise IdeaError(f"Exact: {ex!r} is not allowed (allowed: yes, no)")
        exact = ex in ("yes", "true")
    patch = normalize_patch(diff, aliases=aliases)
    return Idea(slug, " ".join(t.split()), " ".join(r.split()), patch, exact, origin, path)


def make_patch(old: str, new: str, name: str = TARGET) -> str:
    """The unified diff old -> new (``git diff --no-index``), normalized to a/kernel.cu -> b/kernel.cu."""
    with tempfile.TemporaryDirectory(prefix="evo-diff-") as td:
        d = Path(td)
        (d / "a").mkdir()
        (d / "b").mkdir()
        (d / "a" / name).write_text(old)
        (d / "b" / name).write_text(new)
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(d.parent), "LC_ALL": "C"}
        r = subprocess.run(
            ["git", "diff", "--no-index", "--no-color", "--no-ext-diff", "-U3", f"a/{name}", f"b/{name}"],
            cwd=d,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode not in (0, 1):
            raise IdeaError(f"git diff failed: {r.stderr.strip()[:200]}")
        if not r.stdout.strip():
            raise IdeaError("the change is empty")
        lines = [ln for ln in r.stdout.splitlines(keepends=True) if not ln.startswith("index ")]
        return normalize_patch("".join(lines), name)


# ---------------------------------------------------------------------------
# Books of ideas: the family's folder, and what a campaign's ledger froze


def ideas_folder(family: Family) -> Path:
    return family.folder / "ideas"


def _read_patch(path: Path) -> str:
    """A patch file as text: UTF-8, bounded (IdeaError otherwise)."""
    from evo.inputs import PATCH_LIMIT, InputError, read_text

    try:
        return read_text(path, PATCH_LIMIT)
    except InputError as e:
        raise IdeaError(str(e)) from None


def load_folder_ideas(family: Family) -> tuple[dict[str, Idea], dict[str, str]]:
    """(slug -> Idea, slug -> why unreadable) for ``candidates/<family>/ideas/*.patch``."""
    good: dict[str, Idea] = {}
    broken: dict[str, str] = {}
    folder = ideas_folder(family)
    if not folder.is_dir():
        return good, broken
    for p in sorted(folder.glob("*.patch")):
        try:
            good[p.stem] = parse_idea(_read_patch(p), slug=p.stem, origin="folder", path=str(p))
        except (IdeaError, OSError, UnicodeDecodeError) as e:
            broken[p.stem] = str(e)
    return good, broken


def book_from_meta(meta_ideas: Mapping[str, Any] | None) -> dict[str, Idea]:
    return {s: Idea.from_record(s, d) for s, d in (meta_ideas or {}).items() if isinstance(d, Mapping)}


def campaign_book(
    family: Family, meta_ideas: Mapping[str, Any] | None, used: Iterable[str] = (), folder: bool = True
) -> tuple[dict[str, Idea], list[str]]:
    """The ideas a campaign may use: what its ledger froze, plus the folder's (new or unused-and-edited).

    Returns (book, changed): ``changed`` names ideas the campaign already measured whose folder
    text has changed since; the campaign refuses to resume with those (give the edit a new name).
    """
    book = book_from_meta(meta_ideas)
    used = set(used)
    changed: list[str] = []
    if folder:
        for slug, idea in load_folder_ideas(family)[0].items():
            old = book.get(slug)
            if old is not None and old.patch != idea.patch and slug in used:
                changed.append(slug)
                continue
            book[slug] = idea if old is None or old.patch != idea.patch else old
    return book, changed


# ---------------------------------------------------------------------------
# Genes


def gene(slug: str) -> str:
    return GENE_PREFIX + slug


def is_gene(key: str) -> bool:
    return key.startswith(GENE_PREFIX)


def idea_slugs(genome: Mapping[str, Any]) -> list[str]:
    """Slugs of the ideas switched on in ``genome``, in the order they are applied."""
    return sorted(k[len(GENE_PREFIX) :] for k, v in genome.items() if is_gene(k) and v)


def knob_part(genome: Mapping[str, Any]) -> Genome:
    return Genome({k: v for k, v in genome.items() if not is_gene(k)})


def with_ideas(genome: Mapping[str, Any], slugs: Iterable[str]) -> Genome:
    return Genome({**knob_part(genome), **{gene(s): True for s in slugs}})


def toggled(genome: Mapping[str, Any], slug: str) -> Genome:
    on = set(idea_slugs(genome))
    on.symmetric_difference_update({slug})
    return with_ideas(genome, on)


def inexact_ideas(genome: Mapping[str, Any], book: Mapping[str, Idea]) -> list[str]:
    """Genes of ``genome`` whose idea says ``Exact: no`` (unknown ideas fail to build before this matters)."""
    return [gene(s) for s in idea_slugs(genome) if s in book and not book[s].exact]


def describe_change(genome: Mapping[str, Any], prev: Mapping[str, Any]) -> str:
    """Like Genome.describe_change, with ideas written ``+idea <slug>`` / ``-idea <slug>``."""
    a, b = knob_part(genome), knob_part(prev)
    parts = [] if a == b else [a.describe_change(b)]
    on, was = set(idea_slugs(genome)), set(idea_slugs(prev))
    parts += [f"+idea {s}" for s in sorted(on - was)] + [f"-idea {s}" for s in sorted(was - on)]
    return ", ".join(parts) or "no change"


def delta(genome: Mapping[str, Any], prev: Mapping[str, Any]) -> str:
    """knob=value settings and ``+idea <slug>`` / ``-idea <slug>`` that ``genome`` made relative to ``prev``."""
    d = knob_part(genome).diff(knob_part(prev))
    parts = [f"{k}={v}" for k, (_, v) in sorted(d.items())]
    on, was = set(idea_slugs(genome)), set(idea_slugs(prev))
    parts += [f"+idea {s}" for s in sorted(on - was)] + [f"-idea {s}" for s in sorted(was - on)]
    return ", ".join(parts) or "(no change)"


def new_ideas(genome: Mapping[str, Any], prev: Mapping[str, Any] | None) -> list[str]:
    was = set(idea_slugs(prev)) if prev is not None else set()
    return [s for s in idea_slugs(genome) if s not in was]


def outside_answer_replayable(a: Any, by_id: Mapping[int, Any]) -> bool:
    """False for an outside proposer's answer that never became a variant (its genome is just its parent's)."""
    if a.verdict.gate == "proposer":
        return False
    if not a.origin.startswith("outside proposer"):
        return True
    parent = by_id.get(a.parent_id)
    return bool(new_ideas(a.genome, parent.genome if parent is not None else None))


# ---------------------------------------------------------------------------
# Applying


def _applies(source: str, *patches: str) -> bool:
    try:
        for p in patches:
            source = apply_patch(source, p)
        return True
    except PatchError:
        return False


def apply_ideas(source: str, genome: Mapping[str, Any], book: Mapping[str, Idea]) -> str:
    """``source`` with the genome's ideas applied in slug order; raises IdeaError naming the idea(s) at fault."""
    out = source
    done: list[str] = []
    for slug in idea_slugs(genome):
        idea = book.get(slug)
        if idea is None:
            raise IdeaError(f"unknown idea {slug!r}: not in the family's ideas/ folder nor in the campaign's ledger")
        try:
            out = apply_patch(out, idea.patch)
        except PatchError as e:
            if not done or not _applies(source, idea.patch):
                raise IdeaError(f"idea {slug} no longer applies to {TARGET}: {e}") from None
            culprit = next((d for d in done if not _applies(source, book[d].patch, idea.patch)), done[-1])
            raise IdeaError(f"ideas {culprit} and {slug} do not apply together: {slug}'s {e} after {culprit}") from None
        done.append(slug)
    return out


# ---------------------------------------------------------------------------
# Registering (`evo idea add`)


def idea_hook(book: Mapping[str, Idea]) -> Callable[[str, Mapping[str, Any]], str]:
    """The builder's source hook for a campaign's ideas (harness.build.Builder knows nothing of ideas): a genome's
    idea genes applied to the kernel text. ``book`` is read at each build, so ideas added to it later count."""

    def hook(body: str, genome: Mapping[str, Any]) -> str:
        return apply_ideas(body, genome, book) if idea_slugs(genome) else body

    return hook


def check_idea(
    family: Family,
    idea: Idea,
    geometries: Sequence[Any] = (),
    arch: str = "sm_90",
    others: Mapping[str, Idea] | None = None,
    build: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Does ``idea`` apply to the baseline kernel.cu and compile? Raises IdeaError / BuildError; returns facts.

    Compiles the family's baseline genome with the idea at every specialization of ``geometries``
    (the kernel's own defaults when none are given); ``build``: the campaign's Builder arguments (``defines``,
    ``include_dirs``, ``nvrtc_options``), so a kernel that needs the config's header folders compiles as in the
    campaign. Facts: registers before/after per specialization, whether the machine code changed, and which
    other ideas it does not apply together with.
    """
    from harness.build import Builder

    base_src = family.source()
    try:
        apply_patch(base_src, idea.patch)
    except PatchError as e:
        raise IdeaError(f"does not apply to {family.kernel_path}: {e}") from None
    builder = Builder(family, list(geometries), arch, source_hook=idea_hook({idea.slug: idea}), **(build or {}))
    if not builder.specs:
        builder.specs = {"default": {}}
    base = family.baseline()
    try:
        before = builder.build(base)
    except BuildError as e:
        raise IdeaError(f"the family's baseline does not compile here, so the idea cannot be checked: {e}") from None
    try:
        after = builder.build(with_ideas(base, [idea.slug]))
    except IdeaError:
        raise
    except BuildError as e:
        raise BuildError(f"does not compile: {e}", e.log) from None
    conflicts = sorted(
        s
        for s, o in (others or {}).items()
        if s != idea.slug and not _applies(base_src, *[x.patch for _, x in sorted({s: o, idea.slug: idea}.items())])
    )
    return {
        "specs": {
            k: {
                "registers": (before.modules[k].resources.registers, after.modules[k].resources.registers),
                "stack_frame": (before.modules[k].resources.stack_frame, after.modules[k].resources.stack_frame),
            }
            for k in after.modules
        },
        # The machine code alone decides here: an idea is a patch of the source, built with the baseline's knob values
        # both times, so the family's launch() (of knob values, evo/core/variant.py) is the same on both sides.
        "same_sass": before.sass_sha256 == after.sass_sha256,
        "conflicts": conflicts,
    }


def write_idea(family: Family, idea: Idea, folder: Path | None = None, force: bool = False) -> Path:
    """Writes ``ideas/<slug>.patch`` (`evo idea add`); never over a file of the user's, a symlink, or without
    ``force`` over anything (evo/search/idea_files.py). Raises IdeaError."""
    from evo.search.idea_files import IdeaFileError, write_file

    try:
        return write_file(folder or ideas_folder(family), f"{idea.slug}.patch", idea.text(), force=force)
    except IdeaFileError as e:
        raise IdeaError(str(e)) from None


# ---------------------------------------------------------------------------
# History (`evo ideas`, the log)


@dataclass
class IdeaEvent:
    """One attempt that switched an idea on (or an outside answer that never became one)."""

    campaign: str
    attempt: int
    slug: str | None
    verdict: str
    reason: str
    change: str
    speedup: dict[str, float] = field(default_factory=dict)


def idea_events(attempts: Sequence[Any], meta: Mapping[str, Any] | None = None) -> list[IdeaEvent]:
    """Attempts that newly switched an idea on vs the genome they were measured against, and outside answers.

    The parent is the champion the attempt was measured against (``parent_id``), else the baseline.
    """
    meta = meta or {}
    by_id = {a.id: a for a in attempts}
    base = next((a for a in attempts if a.verdict.status == "baseline"), None)
    campaign = (meta.get("config") or {}).get("campaign") or (attempts[0].campaign if attempts else "")
    out: list[IdeaEvent] = []
    for a in attempts:
        if a.verdict.status == "baseline" or a.verdict.kind == "interrupted":
            continue
        parent = by_id.get(a.parent_id) if a.parent_id is not None else None
        parent = parent or base
        prev = parent.genome if parent is not None else {}
        fresh = new_ideas(a.genome, prev)
        speed = {g: iv.value for g, iv in a.speedup_vs_parent.items()}
        if fresh:
            for s in fresh:
                out.append(
                    IdeaEvent(campaign, a.id, s, a.verdict.label(), a.verdict.reason, delta(a.genome, prev), speed)
                )
        elif a.verdict.gate in ("proposer", "idea") or a.origin.startswith("outside proposer"):
            out.append(
                IdeaEvent(
                    campaign,
                    a.id,
                    None,
                    a.verdict.label(),
                    a.verdict.reason,
                    next((n[len("answer: ") :] for n in a.notes if n.startswith("answer: ")), a.origin),
                    speed,
                )
            )
    return out


def _short(s: str, n: int = 160) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def render_ideas(
    family: Family,
    folder_ideas: Mapping[str, Idea],
    broken: Mapping[str, str],
    campaigns: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]],
    folder: Path,
) -> str:
    """`evo ideas`: each idea with its title, rationale and what every campaign made of it."""
    events: dict[str, list[IdeaEvent]] = {}
    answers: list[IdeaEvent] = []
    known: dict[str, Idea] = dict(folder_ideas)
    from_campaigns: dict[str, tuple[Idea, str]] = {}
    for name, attempts, meta in campaigns:
        for slug, idea in book_from_meta(meta.get("ideas")).items():
            if slug not in known and slug not in from_campaigns:
                from_campaigns[slug] = (idea, name)
        for ev in idea_events(attempts, meta):
            (events.setdefault(ev.slug, []) if ev.slug else answers).append(ev)

    def block(slug: str, idea: Idea, where: str = "") -> list[str]:
        evs = events.get(slug, [])
        acc = [e for e in evs if e.verdict == "accepted"]
        tag = "exact" if idea.exact else "may change bits"
        out = [f"{slug}  [{tag}]  {idea.title}{where}", f"    rationale: {_short(idea.rationale, 400)}"]
        if not evs:
            return out + ["    never tried"]
        out.append(f"    tried {len(evs)}x, accepted {len(acc)}x, rejected or failed {len(evs) - len(acc)}x:")
        for e in evs:
            sp = ", ".join(f"{g} {v:.3f}x" for g, v in e.speedup.items())
            out.append(
                f"      {e.campaign} #{e.attempt} ({e.change}): {e.verdict}"
                + (f" [{sp}]" if sp else "")
                + (f": {_short(e.reason)}" if e.verdict != "accepted" else "")
            )
        return out

    L = [
        f"evo: ideas of {family.name}: {len(folder_ideas)} in {folder}"
        + (f", {len(from_campaigns)} more made by campaigns" if from_campaigns else "")
        + f"; {len(campaigns)} campaign(s) read"
    ]
    for slug, idea in sorted(folder_ideas.items()):
        L += block(slug, idea)
    if from_campaigns:
        L.append("made by campaigns (not in the folder; `evo idea add` registers one from logs/<campaign>/ideas/):")
        for slug, (idea, name) in sorted(from_campaigns.items()):
            L += block(slug, idea, f"  (campaign {name}, {idea.origin})")
    if answers:
        L.append("outside answers that did not become ideas:")
        L += [
            f"  {e.campaign} #{e.attempt}: {e.verdict}: {_short(e.reason)} ({_short(e.change, 100)})" for e in answers
        ]
    if broken:
        L.append("unreadable idea files (never proposed):")
        L += [f"  {slug}.patch: {why}" for slug, why in sorted(broken.items())]
    return "\n".join(L) + "\n"
