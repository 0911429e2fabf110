"""`evo export`: the accepted steps of a campaign as a `git am`-able patch series of lasting changes.

Steps that undo an earlier step's change (``barrier early->late``, later ``late->early``) are squashed with it into
one commit (:func:`lasting_series`), whose message names the steps it holds and gives its measured cumulative figures.

Each step's kernel is the family's ``kernel.cu`` with the genome's knob values
written as ``#define`` lines at the top and every preprocessor conditional
that depends only on knobs resolved and removed (evo/search/resolve.py), so a diff between two steps
shows the real code change. Conditionals on a geometry's compile-time
parameters (its specialization, e.g. split count) stay: the exported kernel
still serves every geometry. A step that switches a source-level idea on
(evo/search/ideas.py) has the idea's patch applied to ``kernel.cu`` first, and its
commit message carries the idea's title and rationale.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.core.family import Family
from evo.core.records import ACCEPTED, BASELINE, Attempt, simulated_label
from evo.core.sanitizer_record import describe as sanitizer_describe
from evo.report.export_files import MANIFEST as MANIFEST  # the export folder's files (the names kept for callers)
from evo.report.export_files import ExportError as ExportError
from evo.report.export_files import check_target as check_target
from evo.report.export_files import copy_in, files_under, safe_name, sha256, write_manifest

# the kernel resolved for a genome (evo/search/resolve.py), re-exported: export's callers import it from here
from evo.search.resolve import geometry_defines as geometry_defines
from evo.search.resolve import geometry_free_defines as geometry_free_defines
from evo.search.resolve import knob_macros as knob_macros
from evo.search.resolve import resolve_conditionals as resolve_conditionals
from evo.search.resolve import resolved_kernel as resolved_kernel


def _git(cwd: Path, *args: str, env: Mapping[str, str] | None = None, stdin: str | None = None) -> str:
    import os

    from evo.report.authors import author_env

    e = {**os.environ, **author_env(), **(env or {})}  # signed as the user's git identity (evo/report/authors.py)
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=e, input=stdin
        ).stdout
    except FileNotFoundError:
        raise ExportError("git is not on the PATH; evo export makes the patch series with git") from None
    except subprocess.CalledProcessError as err:
        last = (err.stderr or err.stdout or "").strip().splitlines()
        raise ExportError(f"git {args[0]} failed: {last[-1] if last else f'exit code {err.returncode}'}") from None


def idea_book(family: Family, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The ideas a campaign measured (frozen in its ledger), else the family's folder's."""
    from evo.search.ideas import book_from_meta, load_folder_ideas

    return {**load_folder_ideas(family)[0], **book_from_meta(meta.get("ideas"))}


def specializations(family: Family, geometries: Sequence[Any]) -> list[dict[str, Any]]:
    """The distinct compile-time parts of ``geometries``, in order (what the campaign built one module for)."""
    out: list[dict[str, Any]] = []
    for g in geometries:
        spec = dict(family.specialization(g))
        if spec not in out:
            out.append(spec)
    return out


def step_source(
    family: Family, genome: Mapping[str, Any], book: Mapping[str, Any], specs: Sequence[Mapping[str, Any]] = ()
) -> str:
    """kernel.cu with the genome's ideas applied, knob conditionals resolved (ValueError if an idea fails)."""
    from evo.search.ideas import IdeaError, apply_ideas, idea_slugs

    src = family.source()
    if idea_slugs(genome):
        try:
            src = apply_ideas(src, genome, book)
        except IdeaError as e:
            raise ValueError(f"cannot export: {e}") from None
    return resolved_kernel(family, genome, src, specs) + instantiation(family, genome, src)


def instantiation(family: Family, genome: Mapping[str, Any], source: str) -> str:
    """For a template entry: the explicit instantiation a step launches, appended to its kernel, so the step's
    patch shows its template arguments change ("" for a plain entry, or one whose arguments need a geometry)."""
    if "<" not in family.entry:
        return ""
    from evo.scaffold import read_entries

    try:
        expr = family.entry_expression(genome, {})
    except KeyError:  # an argument comes from a geometry's specialization: no single instantiation to name
        return ""
    name = family.entry.split("<", 1)[0].strip()
    entry = next((e for e in read_entries(source) if e.name == name), None)
    if entry is None or entry.returns != "void":  # enable_if_t<...> names the template's own parameters
        return ""
    return (
        f"\n// evo: the instantiation this step launches (its template-parameter knobs)\n"
        f"template __global__ void {expr}({entry.params});\n"
    )


def _value(genome: Mapping[str, Any], key: str) -> Any:
    """A genome's value of ``key``; an idea gene it lacks is off."""
    from evo.search.ideas import is_gene

    return genome.get(key, False if is_gene(key) else None)


def reverted(first: tuple[Attempt, Attempt], later: tuple[Attempt, Attempt]) -> list[str]:
    """The genome keys (knobs, idea genes) that the change ``later`` = (start, end) sets back to the value they had
    before the change ``first`` = (start, end) changed them: ``later`` undoes (part of) ``first``."""
    (s1, e1), (s2, e2) = first, later
    keys = sorted({*s1.genome, *e1.genome, *s2.genome, *e2.genome})
    return [
        k
        for k in keys
        if _value(s1.genome, k) != _value(e1.genome, k)
        and _value(s2.genome, k) != _value(e2.genome, k)
        and _value(e2.genome, k) == _value(s1.genome, k)
    ]


def lasting_series(base: Attempt, steps: Sequence[Attempt]) -> list[list[Attempt]]:
    """The accepted ``steps`` (in order) grouped into the exported series' commits: a step that undoes (part of) an
    earlier commit's change is squashed with it and every step between, until no commit undoes an earlier one.

    A campaign wanders (``barrier early->late`` at one step, ``late->early`` two steps on); a reviewer reads the
    changes that last. Each group applies onto the end of the one before (the baseline for the first), so the series
    still applies with ``git am`` and ends at the champion."""
    groups = [[a] for a in steps]

    def span(i: int) -> tuple[Attempt, Attempt]:
        return (groups[i - 1][-1] if i else base), groups[i][-1]

    merged = True
    while merged:
        merged = False
        for j in range(1, len(groups)):
            i = next((i for i in range(j) if reverted(span(i), span(j))), None)
            if i is not None:
                groups[i : j + 1] = [[a for g in groups[i : j + 1] for a in g]]
                merged = True
                break
    return groups


def _undone(base: Attempt, group: Sequence[Attempt]) -> list[str]:
    """Lines naming which step of a squashed group undid which earlier one's change, and in what."""
    out = []
    for j in range(1, len(group)):
        for i in range(j):
            keys = reverted((group[i - 1] if i else base, group[i]), (group[j - 1], group[j]))
            if keys:
                out.append(f"#{group[j].id} undid #{group[i].id}'s change of {', '.join(keys)}")
    return out


def commit_message(
    family: Family,
    step: int,
    a: Attempt,
    prev: Attempt,
    meta: Mapping[str, Any],
    book: Mapping[str, Any] | None = None,
    group: Sequence[Attempt] | None = None,
    champion_id: int | None = None,
) -> str:
    """The message of the series' commit ``step`` from ``prev``'s kernel to ``a``'s. ``group``: the accepted steps it
    squashes (``a`` last), when more than one (:func:`lasting_series`): then its figures are ``a``'s cumulative ones,
    measured, and the ratio of the two ends' cumulative medians, which no round measured side by side.
    ``champion_id``: the champion the series ends at (default ``a``), whose ablation (`evo ablate`) it quotes."""
    from evo.search.ideas import describe_change, idea_slugs, knob_part

    book = idea_book(family, meta) if book is None else book
    group = list(group) if group and len(group) > 1 else []
    on, was = idea_slugs(a.genome), idea_slugs(prev.genome)
    added = [s for s in on if s not in was]
    change = describe_change(a.genome, prev.genome)
    if added and len(added) == 1 and knob_part(a.genome) == knob_part(prev.genome) and added[0] in book:
        change = book[added[0]].title  # a step that is one idea: its title says what it does
    dev = meta.get("device") or {}
    lines = [f"{family.name}: {change}", ""]
    if group:
        lines.append(
            f"Step {step} of campaign {a.campaign}: accepted steps {', '.join(f'#{x.id}' for x in group)} squashed "
            f"into one lasting change ({'; '.join(_undone(prev, group))})."
        )
        lines += [
            f"- #{x.id} ({x.origin}): {describe_change(x.genome, y.genome)}" for y, x in zip([prev, *group], group)
        ]
    else:
        lines.append(f"Step {step} of campaign {a.campaign}, attempt #{a.id} ({a.origin}).")
    lines.append("")
    lines.append("What changed and why:")
    for k, (old, new) in sorted(knob_part(a.genome).diff(knob_part(prev.genome)).items()):
        doc = family.knob(k).doc
        lines.append(f"- {k}: {old} -> {new}" + (f" ({doc})" if doc else ""))
    for s in added:
        idea = book.get(s)
        title = idea.title if idea else s
        lines.append(f"- idea {s}: {title}" + ("" if idea is None or idea.exact else " (may change output bits)"))
        if idea is not None and idea.rationale:
            lines += ["  " + ln for ln in _wrap(f"Rationale: {idea.rationale}", 72)]
    for s in [s for s in was if s not in on]:
        idea = book.get(s)
        lines.append(f"- idea {s} taken out" + (f": {idea.title}" if idea else ""))
    if family.template_knobs and set(family.template_knobs) & set(knob_part(a.genome).diff(knob_part(prev.genome))):
        try:  # what the engine's launch site instantiates from now on (a template's arguments live there)
            lines.append(f"- launches {family.entry_expression(knob_part(a.genome), {})}")
        except KeyError:  # an argument comes from a geometry's specialization: no single instantiation to name
            pass
    lines += ["", "Kernel speedup (median of per-round ratios, 95% interval):"]
    for g, iv in a.speedup_vs_parent.items():
        cum = a.speedup_vs_baseline.get(g)
        t = a.timings.get(g)
        pct = a.roofline_pct.get(g)
        if group:  # no round timed the two ends side by side: the ratio of their cumulative medians, and each step
            then = prev.speedup_vs_baseline.get(g)
            start = then.value if then else 1.0 if prev.verdict.status == BASELINE else None
            over = f"{cum.value / start:.3f}x (ratio of the cumulative medians)" if cum and start else "-"
            each = ", ".join(f"#{x.id} {x.speedup_vs_parent[g].fmt()}" for x in group if g in x.speedup_vs_parent)
            head = f"- {g}: this change {over}; its steps, each against the champion then: {each}; "
        else:
            head = f"- {g}: step {iv.fmt()}, "
        lines.append(
            head
            + f"cumulative {cum.fmt() if cum else '-'}"
            + (f", {t.median_us:.2f} us" if t else "")
            + (f", {pct:.1f}% of the copy ceiling" if pct else "")
        )
    bound = a.bound or {}
    of = f" (of the last step, #{a.id})" if group and bound.get("summary") else ""
    lines += [
        "",
        f"Decode bound{of}: " + (bound.get("summary") or "no decode profile configured; no end-to-end claim."),
    ]
    lines += ["", "Correctness:"]
    frozen = meta.get("baseline_hashes") or {}
    for g, hs in a.output_hashes.items():
        same = sum(1 for k, h in hs.items() if frozen.get(f"{g}/{k}") == h)
        lines.append(f"- {g}: {same} of {len(hs)} output hashes (seed/output) equal to the frozen baseline's")
    for g, errs in a.error_vs_ref.items():
        figs = ", ".join(f"{k} {v:.3e}" for k, v in sorted(errs.items()) if k.endswith("rel_err"))
        if figs:
            lines.append(f"- {g}: error vs float64: {figs}")
    # the sanitizer gate's result, and every finding the family declares known with its argument
    san = (a.verdict.detail or {}).get("sanitizer")
    lines += [""] + _wrap(f"Sanitizer: {sanitizer_describe(san)}.", 72)
    for s in (san or {}).get("suppressed") or []:
        lines += ["  " + ln for ln in _wrap(f"Known finding {s.get('name')}: {s.get('argument')}", 70)]
    lines += _carried(a, prev, meta, a.id if champion_id is None else champion_id)
    lines += [""]
    lines += [f"Verdict of #{x.id}: {x.verdict.reason}" for x in group] if group else [f"Verdict: {a.verdict.reason}"]
    lines.append(
        f"Device: {dev.get('name', '?')} (driver {dev.get('driver', '?')}), backend {a.backend}"
        + (f" — {simulated_label(dev)}" if meta.get("simulated") else "")
        + f"; measured {a.finished_at or a.started_at}."
    )
    lines += [""] + _wrap("Caveats: " + "; ".join(_caveats(a, meta)) + ".", 72)
    return "\n".join(lines) + "\n"


def _carried(a: Attempt, prev: Attempt, meta: Mapping[str, Any], champion_id: int) -> list[str]:
    """Which of this commit's changes carry the champion's gain (`evo ablate` of the series' champion)."""
    from evo.report.ablation import carried, changes, latest

    rec = latest(meta, champion_id)
    if rec is None:
        return [""] + _wrap(
            f"Which changes carry the gain: not measured for champion #{champion_id}; "
            "`evo ablate <config>` sets each change back alone, side by side.",
            72,
        )
    said = carried(rec, changes(prev.genome, a.genome))
    if not said:
        return []
    sim = f"; {simulated_label(meta.get('device') or {})}" if rec.get("simulated") else ""
    head = (
        f"Which changes carry the gain (evo ablate of champion #{champion_id} on the {rec.get('backend', '?')} "
        f"backend{sim}, {rec.get('at', '?')}):"
    )
    return ["", head] + [ln for s in said for ln in _wrap(f"- {s}", 72)]


def _caveats(a: Attempt, meta: Mapping[str, Any]) -> list[str]:
    """What the figures above do not cover, for the reviewer: device, geometries, the watched guard."""
    dev = (meta.get("device") or {}).get("name", "one device")
    cfg = meta.get("config") or {}
    geoms = [g.get("name") for g in cfg.get("geometries") or [] if isinstance(g, Mapping)] or list(a.timings)
    weighted = [g.get("name") for g in cfg.get("geometries") or [] if isinstance(g, Mapping) and g.get("weight", 1)]
    out = [f"measured on {dev} only", f"at the campaign's geometries only ({', '.join(str(g) for g in geoms)})"]
    watched = [g for g in geoms if weighted and g not in weighted]
    if watched:
        out.append(f"{', '.join(str(g) for g in watched)} watched (guarded against regression, not optimized)")
    if meta.get("simulated"):
        out.append(f"every time is {simulated_label(meta.get('device') or {})}")
    if ((cfg.get("gates") or {}).get("perf") or {}).get("launch") == "pdl":
        out.append(
            "timed with PDL launches (gates.perf.launch: pdl; every module built with EVO_PDL=1, which the "
            "exported kernel's own default leaves off)"
        )
    if not (a.bound or {}).get("summary"):
        out.append("no end-to-end claim")
    return out


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


def export(
    family: Family,
    attempts: Sequence[Attempt],
    meta: Mapping[str, Any],
    out_dir: Path,
    *,
    force: bool = False,
    notes: list[str] | None = None,
    specs: Sequence[Mapping[str, Any]] = (),
    extra_files: Mapping[str, str] | None = None,
) -> list[Path]:
    """Write baseline + one patch per lasting change + the final kernel into ``out_dir``; return the patches.

    The accepted steps go into the series as :func:`lasting_series` groups them: a step that undoes an earlier one's
    change is squashed with it (and the steps between), so no patch reverts another.

    ``out_dir`` is made absolute first (the series is made in a temporary repository). Nothing is written when the
    folder holds files of anyone else's (:func:`check_target`); ``force`` replaces an earlier export's files.
    A step whose source equals the one before (nothing for ``git am`` to apply) gets no patch: a line in ``notes``.
    ``specs``: the campaign's specializations (:func:`specializations`), for macros the family derives from them.
    ``extra_files``: more files to write with the export, under its manifest (name -> text; a name may lie in one
    subfolder, e.g. the tree series of evo/report/tree_export.py in ``tree/``).
    """
    import os

    out_dir = Path(os.path.abspath(Path(out_dir).expanduser()))
    base = next((a for a in attempts if a.verdict.status == BASELINE), None)
    if base is None:
        raise ExportError("the campaign has no baseline attempt yet")
    chain = [base] + sorted((a for a in attempts if a.verdict.status == ACCEPTED), key=lambda a: a.id)
    fname = f"{family.name}.cu"
    book = idea_book(family, meta)
    texts = {a.id: step_source(family, a.genome, book, specs) for a in chain}  # ValueError before anything is written
    old = check_target(out_dir, force)
    with tempfile.TemporaryDirectory() as td:
        repo, staged = Path(td) / "repo", Path(td) / "out"
        repo.mkdir()
        staged.mkdir()
        _git(repo, "init", "-q")
        (repo / fname).write_text(texts[base.id])
        _git(repo, "add", fname)
        # the baseline's own time, so that exporting the same steps again gives the same files
        date = base.finished_at or base.started_at or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        _git(
            repo,
            "commit",
            "-q",
            "-m",
            f"{family.name}: baseline (the family's defaults)",
            env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )
        prev, step, commits = base, 0, 0
        for group in lasting_series(base, chain[1:]):
            a = group[-1]
            if texts[a.id] == texts[prev.id]:
                if notes is not None:
                    notes.append(f"attempt #{a.id} gives the same kernel source as attempt #{prev.id}: no patch for it")
                continue
            if len(group) > 1 and notes is not None:
                notes.append(
                    f"accepted steps {', '.join(f'#{x.id}' for x in group)} are one patch: "
                    + "; ".join(_undone(prev, group))
                )
            step += 1
            (repo / fname).write_text(texts[a.id])
            _git(repo, "add", fname)
            msg = commit_message(family, step, a, prev, meta, book, group, chain[-1].id)
            when = a.finished_at or date
            _git(repo, "commit", "-q", "-F", "-", stdin=msg, env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
            prev, commits = a, commits + 1
        if commits:
            _git(repo, "format-patch", "-q", "-o", str(staged), f"HEAD~{commits}")
        (staged / f"baseline-{fname}").write_text(texts[base.id])
        (staged / fname).write_text(texts[chain[-1].id])
        for name, text in (extra_files or {}).items():
            if not safe_name(name):
                raise ExportError(f"cannot write {name!r} into an export")
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            (staged / name).write_text(text)
        new = {n: sha256(staged / n) for n in files_under(staged)}
        out_dir.mkdir(parents=True, exist_ok=True)
        # The manifest first names old and new files (one being replaced: its old digest and its new), so a full
        # disk or a kill while copying leaves no file that a later export with --force may not replace; each copy
        # is a rename of a whole file, so a file is always one of the digests named.
        write_manifest(out_dir, base.campaign, {**old, **{n: [*old.get(n, []), d] for n, d in new.items()}})
        for name in new:
            copy_in(staged / name, out_dir, name)
        for name in old:
            if name not in new:
                (out_dir / name).unlink(missing_ok=True)
                sub = (out_dir / name).parent
                if sub != out_dir and sub.is_dir() and not any(sub.iterdir()):
                    sub.rmdir()
        write_manifest(out_dir, base.campaign, new)
    return sorted(out_dir / n for n in new if n.endswith(".patch") and "/" not in n)


def check_final(
    cfg: Any, attempts: Sequence[Attempt], meta: Mapping[str, Any], final: Path, backend: str = "auto"
) -> tuple[bool, list[str]]:
    """Build an exported kernel file as it stands and hold it against the campaign's champion.

    Always: the file, compiled with the champion's knob values, must give the champion's machine code
    (its SASS digest). On a GPU (``backend`` gpu, or auto with one present) the file also goes through the
    correctness gate against baseline hashes frozen in this process. Returns (passed, report lines).
    """
    from evo.search import Proposal
    from evo.search.ideas import inexact_ideas
    from gates.judge import OUTPUTS, JudgeContext, judge
    from harness.build import Builder, BuildError

    fam = cfg.family
    chain = sorted((a for a in attempts if a.verdict.status in (ACCEPTED, BASELINE)), key=lambda a: a.id)
    if not chain:
        return False, ["the campaign has no baseline attempt yet"]
    champ = chain[-1]
    knobs = {k.name: champ.genome[k.name] for k in fam.knobs}  # the file already holds the champion's ideas
    builder = Builder.for_config(cfg)
    try:
        built = builder.build(knobs, base_source=Path(final).read_text())
    except BuildError as e:
        return False, [f"{final} does not build: {str(e).splitlines()[0] if str(e) else 'compile error'}"]
    lines = []
    # The machine code alone: the exported file is built with the champion's knob values, and its launch is the
    # family's launch() of those same values (evo/core/variant.py), unchanged by what the file holds.
    same = not champ.sass_sha256 or built.sass_sha256 == champ.sass_sha256
    lines.append(
        f"machine code of {Path(final).name} ({builder.arch}): {built.sass_sha256[:16]} "
        + ("equals" if same else "DIFFERS FROM")
        + f" attempt #{champ.id}'s {champ.sass_sha256[:16] or '(not recorded)'}"
    )
    ok = same
    from evo.backends import resolve

    backend = resolve(backend, cfg.family)
    if backend != "gpu":
        lines.append(
            f"correctness: not run (no GPU); attempt #{champ.id} passed the correctness gate "
            f"({champ.verdict.status}) with this machine code"
        )
        return ok, lines
    from harness.gpu import GpuBackend

    c = cfg.gates.correctness
    be = GpuBackend.for_config(cfg, builder)
    base = fam.baseline()
    be.correctness(be.load(builder.build(base), base), freeze=True)
    book = idea_book(fam, meta)
    # The campaign's correctness gates (the judge's), over the file as built: the champion's ideas are in the file,
    # so its summation order is theirs too (the exact-mode rule reads them off the champion's genome).
    ctx = JudgeContext.standalone(
        cfg, be, builder, ideas=book, inexact_ideas=lambda _: inexact_ideas(champ.genome, book)
    )
    v, _ = judge(Proposal(fam.genome(knobs), f"export --check of {Path(final).name}"), ctx, only=OUTPUTS, built=built)
    lines.append(
        f"correctness gate on the GPU ({c.mode} mode, {c.seeds} seeds x {c.runs} runs, "
        f"{len(cfg.geometries)} geometries): {'passed' if v.ok else 'FAILED: ' + (v.reason or '')}"
    )
    return ok and v.ok, lines
