"""The commands about families, their ideas and the config schema, none on a campaign's ledger: families, config,
check, new, idea add, ideas."""

from __future__ import annotations

import argparse
import os
import shutil
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evo.cli.common import Command, _fail, _Parser, json_arg, result


def _families_parser(sub) -> None:
    json_arg(sub.add_parser("families", help="list kernel families and their knobs"))


def _config_parser(sub) -> None:
    cf = sub.add_parser("config", help="every config key: its type, what is allowed, its default (docs/config.md)")
    cf.add_argument("section", nargs="?", help="only this section and those under it, e.g. gates.perf")
    cf.add_argument("--markdown", action="store_true", help="as docs/config.md (the whole schema, markdown)")


def _check_parser(sub) -> None:
    ck = sub.add_parser("check", help="is a family ready for a campaign? (compiles, CPU reference; GPU if present)")
    ck.add_argument("config", help="campaign YAML")
    ck.add_argument(
        "--sample",
        type=int,
        default=8,
        help="genomes to compile beside the baseline, at least (default 8; as many more as it takes for every knob "
        "value to be in one; 0: the baseline alone)",
    )
    ck.add_argument("--seed", type=int, default=0, help="seed of that sample")
    ck.add_argument("--cpu", action="store_true", help="skip the GPU part even where a GPU is visible")
    json_arg(ck)


def _new_parser(sub) -> None:
    nw = sub.add_parser("new", help="write a new family folder (a working starter, or stubs around --kernel FILE)")
    nw.add_argument("name", help="the family's name (letters, digits, _)")
    nw.add_argument("--kernel", help="your kernel's .cu file: copied in, its entry point and template knobs read")
    nw.add_argument(
        "--entry",
        help="with --kernel: the kernel to tune among the file's __global__ functions (name or ns::name; needed "
        "when the file holds several)",
    )
    nw.add_argument("-o", "--output", default=".", help="the folder to create NAME/ in (default: here)")
    nw.add_argument(
        "--link",
        action="store_true",
        help="with --kernel: kernel.cu links to your file instead of a copy (one source; export --tree patches it)",
    )


def _idea_parser(sub) -> None:
    # ideas (evo/search/ideas.py): source-level patches as genes
    ia = sub.add_parser("idea", help="register a source-level idea (a patch against a family's kernel.cu)")
    isub = ia.add_subparsers(dest="idea_cmd", metavar="action", parser_class=_Parser)
    add = isub.add_parser("add", help="check that a patch applies to kernel.cu and compiles, then register it")
    add.add_argument("family", help="a family: its name, or a path to its folder")
    add.add_argument("patch", help="a unified diff against kernel.cu, with Title:/Rationale:/Exact: lines before it")
    add.add_argument("--name", help="the idea's name (default: the patch file's name)")
    add.add_argument("--title", help="the title, if the file has no Title: line")
    add.add_argument("--rationale", help="the rationale, if the file has no Rationale: line")
    add.add_argument(
        "--exact", choices=("yes", "no"), help="whether output bits are kept (default: the file's, else yes)"
    )
    add.add_argument("--config", help="compile at this campaign's geometries (default: the family's recorded ones)")
    add.add_argument("--arch", help="compile target (default: the config's arch, else sm_90)")
    add.add_argument("--force", action="store_true", help="replace an idea of the same name")
    add.add_argument("--candidates", help=argparse.SUPPRESS)  # another candidates/ folder (tests)


def _ideas_parser(sub) -> None:
    il = sub.add_parser("ideas", help="a family's ideas and their history across campaigns")
    il.add_argument("family", help="a family: its name, or a path to its folder")
    il.add_argument(
        "--storage",
        action="append",
        default=[],
        help="a ledger URL to read (repeatable; default: every logs/*/ledger.db here)",
    )
    il.add_argument("--candidates", help=argparse.SUPPRESS)


def _config_schema(section: str | None, markdown: bool) -> int:
    """The config schema (evo/config.py's declarations and the proposers' options tables), for people."""
    from evo.config import schema_markdown, schema_text, sections

    if markdown:
        print(schema_markdown(), end="")
        return 0
    paths = [path for path, _ in sections() if path] + ["proposer.options"]
    if section and section not in paths:
        return _fail(f"config: {section!r} is not a section (sections: {', '.join(paths)})")
    print(schema_text(section), end="")
    return 0


def knob_lines(knobs: Sequence[Any], width: int) -> list[str]:
    """A family's knobs as `evo families` lists them, in ``width`` columns: name, values (the default in brackets),
    exactness, doc; columns as wide as this family's longest name and values (up to a quarter of the width), a long
    cell wrapped with its continuation lines under its own column, never into the next one."""
    cells = [
        (
            k.name,
            ", ".join(f"[{v}]" if v == k.default else str(v) for v in k.values),
            "bit-preserving" if k.exact else "may change bits",
            " ".join(str(k.doc).split()),
        )
        for k in knobs
    ]
    if not cells:
        return []
    w_name = max(len(c[0]) for c in cells)
    w_vals = min(max(len(c[1]) for c in cells), max(12, width // 4))
    w_tag = 15
    w_doc = width - (2 + w_name + 1 + w_vals + 1 + w_tag + 1)
    below = w_doc < 24  # too narrow beside the other columns: the doc goes under the row, indented
    out = []
    for name, vals, tag, doc in cells:
        vcol = textwrap.wrap(vals, w_vals, break_on_hyphens=False) or [""]
        dcol = [] if below else textwrap.wrap(doc, w_doc, break_on_hyphens=False)
        for i in range(max(len(vcol), len(dcol))):
            row = [name if i == 0 else "", vcol[i] if i < len(vcol) else "", tag if i == 0 else ""]
            text = f"  {row[0]:<{w_name}} {row[1]:<{w_vals}} {row[2]:<{w_tag}} {dcol[i] if i < len(dcol) else ''}"
            out.append(text.rstrip())
        if below:
            out += ["      " + d for d in textwrap.wrap(doc, max(20, width - 6), break_on_hyphens=False)]
    return out


def _families() -> int:
    """Every family evo can find, where it comes from, and its knobs; a broken one is one line, the rest still
    listed. Exit 1 when any failed to load."""
    from evo.core.family import FamilyError, find_families, load_source

    seen: dict[str, str] = {}
    failed = 0
    listed: list[dict[str, Any]] = []  # --json
    for src in find_families():
        if src.name in seen:
            print(f"{src.name}: {src.origin} ({src.where}), shadowed by the one from {seen[src.name]}")
            listed.append({"name": src.name, "origin": src.origin, "where": src.where, "shadowed_by": seen[src.name]})
            continue
        seen[src.name] = src.origin
        try:
            fam = load_source(src)
        except FamilyError as e:
            print(f"cannot load {e}")
            listed.append({"name": src.name, "origin": src.origin, "where": src.where, "error": str(e)})
            failed += 1
            continue
        print(f"{fam.name}: {fam.description}  [{src.origin}: {src.where}]")
        for line in knob_lines(fam.knobs, shutil.get_terminal_size((100, 24)).columns):
            print(line)
        knobs = []
        for k in fam.knobs:
            knobs.append(
                {"name": k.name, "values": list(k.values), "default": k.default, "exact": k.exact, "doc": k.doc}
            )
        listed.append(
            {"name": fam.name, "origin": src.origin, "where": src.where, "description": fam.description, "knobs": knobs}
        )
    if not seen:
        print("no families found (shipped ones missing: reinstall evo; yours: EVO_FAMILY_PATH or a path in family:)")
    from evo.config import shipped_config_names

    print(f"shipped configs (evo run NAME): {', '.join(shipped_config_names()) or 'none'}")
    result(families=listed, shipped_configs=list(shipped_config_names()), failed=failed)
    return 1 if failed else 0


def _check(args) -> int:
    """`evo check`: the checks run in a child process (evo/family_child.py), which this one watches, so that a
    family's code that exits, crashes or hangs still ends in one FAIL line; the child runs them here."""
    from evo.cli.common import EXIT_UNCHECKED, EXIT_USAGE
    from evo.family_child import in_child, run_in_child

    if args.sample < 0:
        return _fail("check: --sample must be 0 or more")
    if not in_child():
        argv = ["check", str(args.config), "--sample", str(args.sample), "--seed", str(args.seed)]
        rc = run_in_child(argv + (["--cpu"] if args.cpu else []))
        result(config=args.config, ok=rc == 0)  # the child printed its lines; --json's document is the parent's
        return rc
    from evo.check import CONFIG_ERROR, NOT_CHECKED, run_check
    from evo.core.hooks import DONE, trace

    ok, line = run_check(args.config, sample=args.sample, seed=args.seed, gpu=not args.cpu)
    print(line, flush=True)
    result(config=args.config, ok=ok, summary=line)
    trace("", DONE)
    if ok:
        return 0
    if line.startswith(NOT_CHECKED):
        return EXIT_UNCHECKED
    return EXIT_USAGE if line.startswith(f"evo check: FAIL: {CONFIG_ERROR}") else 1


def _new(args) -> int:
    from evo.scaffold import ScaffoldError, new_family

    try:
        if args.link and not args.kernel:
            raise ScaffoldError("--link links kernel.cu to your kernel: give it with --kernel FILE")
        kernel = Path(args.kernel) if args.kernel else None
        dest = new_family(args.name, Path(args.output), kernel, args.link, args.entry)
    except ScaffoldError as e:
        return _fail(f"new: {e}")
    cfg = dest / "evo.yaml"
    how = f" (a link to {args.kernel})" if args.link else ""
    print(f"wrote {dest}/ (kernel.cu{how}, family.py, evo.yaml, test_family.py); next: evo check {cfg}")
    if kernel is not None:
        _say_includes(kernel)
    return 0


def _say_includes(kernel: Path) -> None:
    """What evo new put in include_dirs, and the headers it found nowhere (one line each)."""
    from evo.include_roots import find_include_roots, listed

    roots = find_include_roots(kernel)
    for root, found in roots.folders.items():
        if root == kernel.resolve().parent:
            print(f"note: {listed(found)} beside your kernel: its folder is in family.py's include_dirs")
        else:
            print(f"note: {listed(found)} found from {os.path.relpath(root)}: it is in family.py's include_dirs")
    if roots.torch:
        print(f"note: {listed(roots.torch)} are torch's headers: family.py says torch_headers=True (nvcc)")
    named = (inc if by == kernel.resolve() else f"{inc} (from {by.name})" for inc, by in roots.missing)
    missing = list(dict.fromkeys(named))
    if missing:
        print(
            f"note: {listed(missing, 8)} found nowhere near your kernel: add the folder that holds "
            f"{'them' if len(missing) > 1 else 'it'} to family.py's include_dirs (relative to the family folder)"
        )


def _family_for(args):
    from evo.core.family import FamilyError, is_family_path, load_family

    root = Path(args.candidates) if getattr(args, "candidates", None) and not is_family_path(args.family) else None
    try:
        return load_family(args.family, root)
    except FamilyError as e:
        raise _UsageError(str(e)) from None


class _UsageError(Exception):
    pass


def _idea_add(args) -> int:
    """`evo idea add <family> <patch>`: applies to the baseline and compiles, or one line and exit 2."""
    from evo.config import ConfigError, load_config
    from evo.core.family import FamilyError, Geometry
    from evo.search.idea_files import replaceable, taken
    from evo.search.ideas import (
        IdeaError,
        _read_patch,
        check_idea,
        ideas_folder,
        load_folder_ideas,
        parse_idea,
        write_idea,
    )
    from harness.build import BuildError
    from harness.recorded import recorded_geometries

    try:
        fam = _family_for(args)
    except _UsageError as e:
        return _fail(str(e))
    src = Path(args.patch)
    if not src.is_file():
        return _fail(f"{src}: no such patch file")
    slug = args.name or src.name.removesuffix(".patch").removesuffix(".diff")
    try:
        idea = parse_idea(
            _read_patch(src),
            slug=slug,
            origin="cli",
            path=str(src),
            title=args.title,
            rationale=args.rationale,
            exact=None if args.exact is None else args.exact == "yes",
            # kernel.cu a link to the engine's file (evo new --link): a `git diff` of that file names it so
            aliases=(fam.kernel_path.resolve().name,) if fam.kernel_path.is_symlink() else (),
        )
    except IdeaError as e:
        return _fail(f"idea {slug}: {e}")
    existing, _ = load_folder_ideas(fam)
    if slug in existing and not args.force and existing[slug].patch == idea.patch:
        return _fail(f"idea {slug} is already registered for {fam.name} with this patch")
    # any file at that name (a draft that does not parse, a symlink): the user's unless evo wrote it
    target = ideas_folder(fam) / f"{slug}.patch"
    why = replaceable(target) if args.force else taken(target)
    if why is not None:
        return _fail(f"idea {slug}: {why}" + ("" if args.force else " (give --name, or --force to replace it)"))
    same = next((s for s, i in existing.items() if i.change_sha256 == idea.change_sha256 and s != slug), None)
    if same:
        return _fail(f"idea {slug} makes the same change as idea {same}, already registered for {fam.name}")
    build: dict[str, Any] = {}
    arch = args.arch or "sm_90"
    if args.config:
        try:
            cfg = load_config(args.config)
        except (ConfigError, FamilyError) as e:
            return _fail(f"idea {slug}: {args.config}: {e}")
        geometries = list(cfg.geometries)
        arch = args.arch or cfg.arch
        # the campaign's header folders, options and macros: the idea compiles as the campaign will build it
        build = {
            "defines": cfg.build_defines,
            "include_dirs": [str(d) for d in cfg.build.include_dirs],
            "nvrtc_options": list(cfg.build.nvrtc_options),
            "compiler": cfg.build.compiler,
            "compile_options": list(cfg.build.compile_options),
            "torch_headers": cfg.build.torch_headers,
        }
    else:
        geometries = [Geometry(g["name"], g["params"]) for g in recorded_geometries(fam)]
        geometries = [g for g in geometries if fam.check_geometry(g.params) is None]
    try:
        facts = check_idea(fam, idea, geometries, arch, others=existing, build=build)
    except (IdeaError, BuildError) as e:
        return _fail(f"idea {slug} refused: {' '.join(str(e).split())}")
    try:
        path = write_idea(fam, idea, force=args.force)
    except IdeaError as e:
        return _fail(f"idea {slug}: {e}")
    except OSError as e:
        return _fail(f"idea {slug}: cannot write {ideas_folder(fam)}: {e.strerror or e}")
    regs = "; ".join(
        f"{k}: {r['registers'][0]}->{r['registers'][1]} registers, stack {r['stack_frame'][0]}->{r['stack_frame'][1]} B"
        for k, r in facts["specs"].items()
    )
    print(f"evo: idea {slug} registered for {fam.name} at {path}: applies to kernel.cu and compiles ({regs})")
    if facts["same_sass"]:
        print("evo: note: with the baseline's knob values it compiles to the same machine code as the baseline")
    for other in facts["conflicts"]:
        print(f"evo: note: it does not apply together with idea {other} (a genome with both is an error: idea)")
    return 0


def _ideas(args) -> int:
    """`evo ideas <family>`: every idea (folder and campaigns) with its verdicts across campaigns."""
    from evo.ledger.rdb import campaign_names
    from evo.ledger.storage import open_ledger
    from evo.ledger.storage_url import StorageURLError, sqlite_path, sqlite_url
    from evo.search.ideas import ideas_folder, load_folder_ideas, render_ideas

    try:
        fam = _family_for(args)
    except _UsageError as e:
        return _fail(str(e))
    urls = list(args.storage) or [sqlite_url(p.resolve()) for p in sorted(Path.cwd().glob("logs/*/ledger.db"))]
    campaigns = []
    for url in urls:
        try:
            path = sqlite_path(url)
        except StorageURLError as e:
            return _fail(str(e))
        if path is not None and not path.is_file():
            return _fail(f"{url}: no such ledger")
        try:
            names = campaign_names(url)
        except Exception as e:
            print(f"evo: skipped {url}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        for name in names:
            led = open_ledger(url, name, fam.knobs, readonly=True)
            meta = led.all_meta()
            if (meta.get("config") or {}).get("family") == fam.name:
                campaigns.append((name, led.attempts(), meta))
    good, broken = load_folder_ideas(fam)
    print(render_ideas(fam, good, broken, campaigns, ideas_folder(fam)), end="")
    return 0


def _idea(args) -> int:
    """`evo idea ACTION`: its one action so far is add."""
    return _idea_add(args) if args.idea_cmd == "add" else _fail("idea: give an action (evo idea add ...)")


FAMILIES = Command(_families_parser, lambda args: _families(), campaign=False)
CONFIG = Command(_config_parser, lambda args: _config_schema(args.section, args.markdown), campaign=False)
CHECK = Command(_check_parser, _check, campaign=False)
NEW = Command(_new_parser, _new, campaign=False)
IDEA = Command(_idea_parser, _idea, campaign=False)
IDEAS = Command(_ideas_parser, _ideas, campaign=False)
