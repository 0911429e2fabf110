"""The `evo` command: run, status, log, table, families.

Every user error is one line on stderr and exit code 2; nothing recorded in a
campaign is touched by a failing command.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from pathlib import Path
from typing import NoReturn

from evo.backends import BACKENDS

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        sys.stderr.write(f"evo: {message} (see evo --help)\n")
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evo", description="Evolutionary, gated search over CUDA kernel variants.")
    sub = p.add_subparsers(dest="cmd", metavar="command", parser_class=_Parser)
    r = sub.add_parser(
        "run", help="start or resume a campaign", epilog="every key of the config, with its default: evo config"
    )
    r.add_argument("config", help="campaign YAML, e.g. configs/mhc_pre_big_fuse.yaml")
    r.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    r.add_argument("--storage", help="override the config's storage URL")
    r.add_argument("--attempts", type=int, help="override budget.attempts")
    r.add_argument("--minutes", type=float, help="override budget.minutes")
    r.add_argument("--plain", action="store_true", help="one line per attempt instead of the live view")
    # workers (evo/loop/workers.py): several processes or hosts share one campaign through its storage
    w = sub.add_parser("worker", help="join a campaign as one of several workers sharing its storage (e.g. PostgreSQL)")
    w.add_argument("config", help="campaign YAML")
    w.add_argument("--storage", help="the shared storage URL, e.g. postgresql+psycopg2://user:pw@host/db")
    w.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    w.add_argument("--attempts", type=int, help="override budget.attempts (the campaign's total, all workers)")
    w.add_argument("--minutes", type=float, help="override budget.minutes")
    for name, help_ in (("status", "summarize a campaign"), ("log", "write the markdown attempt log")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("config", help="campaign YAML")
        s.add_argument("--storage", help="override the config's storage URL")
        if name == "log":
            s.add_argument("-o", "--output", help="where to write (default logs/<campaign>/attempts.md)")
    tb = sub.add_parser("table", help="every attempt at every geometry as a CSV or parquet table")
    tb.add_argument("config", help="campaign YAML")
    tb.add_argument("--storage", help="override the config's storage URL")
    tb.add_argument(
        "-o", "--output", help="a .csv or .parquet file (default logs/<campaign>/attempts.csv); parquet needs pyarrow"
    )
    e = sub.add_parser("export", help="accepted steps as a git-am patch series, plus the final kernel")
    e.add_argument("config", help="campaign YAML")
    e.add_argument("--storage", help="override the config's storage URL")
    e.add_argument("-o", "--output", help="folder (default logs/<campaign>/export; relative to the working directory)")
    e.add_argument("--force", action="store_true", help="replace an earlier export in that folder (only its files)")
    e.add_argument(
        "--check",
        action="store_true",
        help="then build the final file: it must give the champion's machine code and, on a GPU, "
        "pass the correctness gate",
    )
    e.add_argument(
        "--tree",
        action="store_true",
        help="also write the series as patches to the family's own kernel.cu and family.py as they are in your "
        "repository (knob defaults set to each step's values, its ideas applied), into OUTPUT/tree/; paths are "
        "relative to the git top level of the family folder (else its parent); apply there with git am",
    )
    rp = sub.add_parser("replay", help="re-judge rejected attempts on this machine with today's gates")
    rp.add_argument("config", help="campaign YAML")
    rp.add_argument("--storage", help="override the config's storage URL")
    rp.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    rp.add_argument("--gate", help="only attempts rejected by this gate (static, correctness, perf) or error kind")
    rp.add_argument("--id", type=int, action="append", dest="ids", help="only this attempt (repeatable)")
    sz = sub.add_parser("sanitize", help="compute-sanitizer (memcheck, racecheck) on the champion or one attempt")
    sz.add_argument("config", help="campaign YAML")
    sz.add_argument("--storage", help="override the config's storage URL")
    sz.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    sz.add_argument("--id", type=int, help="this attempt instead of the champion")
    ab = sub.add_parser(
        "ablate",
        help="which of the champion's changes carry its gain: each set back alone, measured side by side",
    )
    ab.add_argument("config", help="campaign YAML")
    ab.add_argument("--storage", help="override the config's storage URL")
    ab.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    ab.add_argument("--rounds", type=int, help="interleaved rounds a geometry (default gates.perf.rounds)")
    c = sub.add_parser("selfcheck", help="A/A acceptance check and the family's deliberate faults")
    c.add_argument("config", help="campaign YAML")
    c.add_argument("--storage", help="override the config's storage URL")
    c.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    c.add_argument("--aa", type=int, default=50, help="A/A perf-gate evaluations (default 50)")
    sub.add_parser("families", help="list kernel families and their knobs")
    cf = sub.add_parser("config", help="every config key: its type, what is allowed, its default (docs/config.md)")
    cf.add_argument("section", nargs="?", help="only this section and those under it, e.g. gates.perf")
    cf.add_argument("--markdown", action="store_true", help="as docs/config.md (the whole schema, markdown)")
    ck = sub.add_parser("check", help="is a family ready for a campaign? (compiles, CPU reference; GPU if present)")
    ck.add_argument("config", help="campaign YAML")
    ck.add_argument("--sample", type=int, default=8, help="random genomes to compile beside the baseline (default 8)")
    ck.add_argument("--seed", type=int, default=0, help="seed of that sample")
    ck.add_argument("--cpu", action="store_true", help="skip the GPU part even where a GPU is visible")
    nw = sub.add_parser("new", help="write a new family folder (a working starter, or stubs around --kernel FILE)")
    nw.add_argument("name", help="the family's name (letters, digits, _)")
    nw.add_argument("--kernel", help="your kernel's .cu file: copied in, its entry point and template knobs read")
    nw.add_argument("-o", "--output", default=".", help="the folder to create NAME/ in (default: here)")
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
    add.add_argument("--arch", default="sm_90", help="compile target (default sm_90)")
    add.add_argument("--force", action="store_true", help="replace an idea of the same name")
    add.add_argument("--candidates", help=argparse.SUPPRESS)  # another candidates/ folder (tests)
    il = sub.add_parser("ideas", help="a family's ideas and their history across campaigns")
    il.add_argument("family", help="a family: its name, or a path to its folder")
    il.add_argument(
        "--storage",
        action="append",
        default=[],
        help="a ledger URL to read (repeatable; default: every logs/*/ledger.db here)",
    )
    il.add_argument("--candidates", help=argparse.SUPPRESS)
    return p


def _fail(msg: str) -> int:
    sys.stderr.write(f"evo: {msg}\n")
    return EXIT_USAGE


def _cap_blas_threads() -> None:
    """One OpenBLAS thread per evo process unless the user set a number.

    evo's own linear algebra is small (the surrogate's model conditions on at most 256 genomes), and OpenBLAS's
    default of one busy-waiting thread per core makes the workers sharing a host, and the process timing the
    kernels, fight over the cores: on the 2-GPU H200 host two workers spent ~0.4 s per attempt more than one.
    It must be set before numpy is first imported, so it is the first thing the command does."""
    import os

    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    from evo import stop

    if argv is None:
        # SIGINT and SIGTERM (a `timeout` around evo, a batch system) are stop requests, honoured at the next
        # safe point (evo/stop.py); the exit code says which: 130 or 143
        stop.install()
    try:
        code = _main(argv)
        stop.check()  # a request during the command's last steps still says it was stopped
        return code
    except BrokenPipeError:  # `evo status | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt as e:  # a stop request at a safe point (or a Ctrl-C before evo took SIGINT)
        signum = getattr(e, "signum", signal.SIGINT)
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        sys.stderr.write(
            f"evo: stopped by {stop.name(signum)}; what was recorded is kept (the same command resumes a campaign)\n"
        )
        return stop.exit_code(signum)


def _main(argv: list[str] | None = None) -> int:
    from evo import stop

    _cap_blas_threads()
    args = _parser().parse_args(argv)
    stop.check()
    if args.cmd is None:
        _parser().print_help()
        return EXIT_USAGE
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    from evo.config import ConfigError, load_config
    from evo.ledger.ledger import LedgerError

    cfg = None
    try:
        if args.cmd == "families":
            return _families()
        if args.cmd == "config":
            return _config_schema(args.section, args.markdown)
        if args.cmd == "check":
            return _check(args)
        if args.cmd == "new":
            return _new(args)
        if args.cmd == "idea":
            return _idea_add(args) if args.idea_cmd == "add" else _fail("idea: give an action (evo idea add ...)")
        if args.cmd == "ideas":
            return _ideas(args)
        cfg = load_config(
            args.config,
            backend_override=getattr(args, "backend", None),
            storage_override=getattr(args, "storage", None),
        )
        stop.check()
        if args.cmd == "run":
            return _run(cfg, args)
        if args.cmd == "worker":
            from evo.loop.workers import cli_worker

            return cli_worker(cfg, args)
        if args.cmd == "status":
            return _status(cfg)
        if args.cmd == "log":
            return _log(cfg, args.output)
        if args.cmd == "table":
            return _table(cfg, args.output)
        if args.cmd == "export":
            return _export(cfg, args.output, args.check, args.force, args.tree)
        if args.cmd == "replay":
            return _replay(cfg, args.gate, args.ids)
        if args.cmd == "selfcheck":
            return _selfcheck(cfg, args.aa)
        if args.cmd == "sanitize":
            return _sanitize(cfg, args.id)
        if args.cmd == "ablate":
            return _ablate(cfg, args.rounds)
    except ConfigError as e:
        return _fail(f"config error: {e}")
    except LedgerError as e:
        return _fail(str(e))
    except (SQLAlchemyError, StorageInternalError) as e:  # the storage failed under a command (disk full, gone)
        from evo.ledger.ledger import _first_line, safe_url

        where = safe_url(cfg.storage) if cfg is not None else "the storage"
        return _fail(f"{where}: {_first_line(e)}; what was committed before is kept")
    except BrokenPipeError:  # `evo status | head`: main() says nothing more
        raise
    except OSError as e:  # a file the command writes or reads (disk full, read-only, no such folder)
        what = f"{e.filename}: " if e.filename else ""
        return _fail(f"{what}{e.strerror or type(e).__name__} ({type(e).__name__}); nothing recorded was lost")
    return EXIT_USAGE


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


def _families() -> int:
    """Every family evo can find, where it comes from, and its knobs; a broken one is one line, the rest still
    listed. Exit 1 when any failed to load."""
    from evo.core.family import FamilyError, find_families, load_source

    seen: dict[str, str] = {}
    failed = 0
    for src in find_families():
        if src.name in seen:
            print(f"{src.name}: {src.origin} ({src.where}), shadowed by the one from {seen[src.name]}")
            continue
        seen[src.name] = src.origin
        try:
            fam = load_source(src)
        except FamilyError as e:
            print(f"cannot load {e}")
            failed += 1
            continue
        print(f"{fam.name}: {fam.description}  [{src.origin}: {src.where}]")
        for k in fam.knobs:
            tag = "bit-preserving" if k.exact else "may change bits"
            vals = ", ".join(f"[{v}]" if v == k.default else str(v) for v in k.values)
            print(f"  {k.name:<14} {vals:<28} {tag:<16} {k.doc}")
    if not seen:
        print("no families found (shipped ones missing: reinstall evo; yours: EVO_FAMILY_PATH or a path in family:)")
    from evo.config import shipped_config_names

    print(f"shipped configs (evo run NAME): {', '.join(shipped_config_names()) or 'none'}")
    return 1 if failed else 0


def _check(args) -> int:
    from evo.check import run_check

    if args.sample < 0:
        return _fail("check: --sample must be 0 or more")
    ok, line = run_check(args.config, sample=args.sample, seed=args.seed, gpu=not args.cpu)
    print(line)
    return 0 if ok else 1


def _new(args) -> int:
    from evo.scaffold import ScaffoldError, new_family

    try:
        dest = new_family(args.name, Path(args.output), Path(args.kernel) if args.kernel else None)
    except ScaffoldError as e:
        return _fail(f"new: {e}")
    cfg = dest / "evo.yaml"
    print(f"wrote {dest}/ (kernel.cu, family.py, evo.yaml, test_family.py); next: evo check {cfg}")
    return 0


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
    from evo.config import load_config
    from evo.core.family import Geometry
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
        )
    except IdeaError as e:
        return _fail(f"idea {slug}: {e}")
    existing, _ = load_folder_ideas(fam)
    if slug in existing and not args.force:
        if existing[slug].patch == idea.patch:
            return _fail(f"idea {slug} is already registered for {fam.name} with this patch")
        return _fail(f"idea {slug} already exists in {ideas_folder(fam)} (give --name, or --force to replace it)")
    same = next((s for s, i in existing.items() if i.change_sha256 == idea.change_sha256 and s != slug), None)
    if same:
        return _fail(f"idea {slug} makes the same change as idea {same}, already registered for {fam.name}")
    if args.config:
        geometries = load_config(args.config).geometries
    else:
        geometries = [Geometry(g["name"], g["params"]) for g in recorded_geometries(fam)]
        geometries = [g for g in geometries if fam.check_geometry(g.params) is None]
    try:
        facts = check_idea(fam, idea, geometries, args.arch, others=existing)
    except (IdeaError, BuildError) as e:
        return _fail(f"idea {slug} refused: {' '.join(str(e).split())}")
    path = write_idea(fam, idea)
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
    from evo.ledger.ledger import Ledger
    from evo.search.ideas import ideas_folder, load_folder_ideas, render_ideas

    try:
        fam = _family_for(args)
    except _UsageError as e:
        return _fail(str(e))
    urls = list(args.storage) or [f"sqlite:///{p.resolve()}" for p in sorted(Path.cwd().glob("logs/*/ledger.db"))]
    campaigns = []
    import optuna

    for url in urls:
        if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).is_file():
            return _fail(f"{url}: no such ledger")
        try:
            names = optuna.get_all_study_names(storage=url)
        except Exception as e:
            print(f"evo: skipped {url}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        for name in names:
            led = Ledger(url, name, fam.knobs, readonly=True)
            meta = led.all_meta()
            if (meta.get("config") or {}).get("family") == fam.name:
                campaigns.append((name, led.attempts(), meta))
    good, broken = load_folder_ideas(fam)
    print(render_ideas(fam, good, broken, campaigns, ideas_folder(fam)), end="")
    return 0


def _open_ledger(cfg, readonly: bool = False):
    """The campaign's ledger; ``readonly`` (status, log, export): opened so that nothing can be written to it."""
    from evo.ledger.ledger import Ledger

    return Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=readonly)


def _damaged(led) -> None:
    note = led.damaged_note()
    if note:
        sys.stderr.write(f"evo: warning: {note}\n")


def _existing(cfg) -> bool:
    if cfg.storage.startswith("sqlite:///"):  # a folder or a damaged file there is the ledger check's to name
        return Path(cfg.storage[len("sqlite:///") :]).exists()
    return True


def _run(cfg, args) -> int:
    from evo.config import apply_budget_overrides
    from evo.loop.campaign import Campaign, CampaignError
    from evo.report.logmd import write_log
    from evo.report.progress import print_champion, run_with_progress

    apply_budget_overrides(cfg, args.attempts, args.minutes)
    if cfg.clocks == "lock":
        return _run_locked(cfg, args)
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]))
        camp.claim()  # before anything is printed: a second evo run of this campaign says one line
    except CampaignError as e:
        return _fail(str(e))
    _damaged(camp.ledger)
    sim = " — simulated from recorded H200 measurements" if camp.simulated else ""
    print(f"evo: campaign {cfg.campaign} ({cfg.family.name}) on the {camp.backend.name} backend{sim}")
    try:
        summary = run_with_progress(camp, live=not args.plain)
    except CampaignError as e:
        return _fail(str(e))
    finally:
        camp.ledger.release()
    print(f"evo: stopped: {summary.stopped}; {summary.new_attempts} new attempt(s), {summary.attempts} recorded{sim}")
    print_champion(summary, sim)
    _sanitize_after_run(camp, summary)
    log = cfg.log_dir / "attempts.md"
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), log)
    print(f"evo: attempt log: {log}{sim}")
    return 0


def _sanitize_after_run(camp, summary) -> None:
    """compute-sanitizer on a finished GPU campaign's champion (evo/measure/sanitize.py); its trouble never fails the
    run."""
    from evo.measure.sanitize import after_run

    close = getattr(camp.backend, "close", None)
    if callable(close):  # the worker's GPU memory and context are no longer needed
        close()
    try:
        after_run(camp.cfg, camp.ledger, camp.backend.name, camp.simulated, summary.stopped)
    except Exception as e:
        print(f"evo: sanitizer pass failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}")


def _sanitize(cfg, attempt_id: int | None) -> int:
    """`evo sanitize`: the pass on demand; exit 1 when a tool reports errors, times out or fails."""
    from evo.measure.sanitize import failed_tools, sanitize_attempt, skip_reason
    from evo.report.logmd import write_log
    from harness.gpu import gpu_available

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg)
    champ = led.champion()
    if attempt_id is None:
        target = champ
        if target is None:
            return _fail(f"campaign {cfg.campaign} has no champion yet (no baseline recorded)")
    else:
        target = next((a for a in led.attempts() if a.id == attempt_id), None)
        if target is None:
            return _fail(f"--id {attempt_id}: no such attempt in campaign {cfg.campaign}")
    kind = cfg.backend if cfg.backend != "auto" else ("gpu" if gpu_available() else "recorded")
    if kind != "gpu":  # on demand, enabled: off does not stop it; only a backend that runs no kernel does
        print(f"evo: sanitizer skipped: {skip_reason(cfg, kind, True)}")
        return 0
    record = sanitize_attempt(cfg, led, target, champ.id if champ else None)
    write_log(led.attempts(), led.all_meta(), cfg.log_dir / "attempts.md")
    return 1 if failed_tools(record) else 0


def _run_locked(cfg, args) -> int:
    """clocks: lock — only for a GPU the user owns; restored on every exit (and at next start after a SIGKILL)."""
    from harness.device import ClockLock, ClockLockError, Nvml, restore_stale_lock

    nvml = Nvml()
    marker = cfg.log_dir / "clock-lock.json"
    try:
        if restore_stale_lock(nvml, marker):
            print("evo: restored SM clocks left locked by a killed campaign")
        with ClockLock(nvml, cfg.lock_sm_mhz, marker):
            cfg.clocks = "record"
            return _run(cfg, args)
    except ClockLockError as e:
        return _fail(str(e))


def _selfcheck(cfg, aa: int) -> int:
    from evo.loop.campaign import Campaign, CampaignError
    from evo.loop.selfcheck import selfcheck
    from evo.report.logmd import write_log

    if aa < 1:
        return _fail("--aa must be >= 1")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]))
        camp.claim()
        try:
            out = selfcheck(camp, aa)
        finally:
            camp.ledger.release()
    except CampaignError as e:
        return _fail(str(e))
    sim = " (simulated from recorded H200 measurements)" if camp.simulated else ""
    a = out["aa"]
    print(
        f"evo: A/A check{sim}: {a['accepted']} of {a['evaluations']} evaluations accepted; highest lower bound "
        f"{a['max_lower_bound']:.4f} against a threshold of {a['threshold']:.4f} (floor {a['floor']:.3%})"
    )
    for title, v in out["faults"].items():
        mark = {True: "right verdict", False: f"WRONG VERDICT (expected {v['expected']})", None: "needs a GPU"}[v["ok"]]
        print(f"evo: fault '{title}': {v['verdict']} [{mark}]: {v['reason'][:160]}")
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    bad = a["accepted"] > 0 or any(v["ok"] is False for v in out["faults"].values())
    return 1 if bad else 0


def _export(cfg, output: str | None, check: bool = False, force: bool = False, tree: bool = False) -> int:
    import os

    from evo.report.export import check_final, export, specializations

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg, readonly=True)
    out = Path(os.path.abspath(Path(output).expanduser() if output else cfg.log_dir / "export"))
    notes: list[str] = []
    attempts = led.attempts()
    _damaged(led)
    specs = specializations(cfg.family, cfg.geometries)
    series = None
    try:
        if tree:  # made first: a step that cannot be written onto today's files stops the export before it writes
            from evo.report.tree_export import tree_differences, tree_series

            base = next((a for a in attempts if a.verdict.status == "baseline"), None)
            differences = tree_differences(cfg, base) if base is not None else []
            series = tree_series(cfg.family, attempts, led.all_meta(), specs, differences)
        patches = export(
            cfg.family,
            attempts,
            led.all_meta(),
            out,
            force=force,
            notes=notes,
            specs=specs,
            extra_files=series.files if series is not None else None,
        )
    except ValueError as e:
        return _fail(str(e))
    for note in notes:
        print(f"evo: note: {note}")
    print(f"evo: {len(patches)} patch(es) and the final {cfg.family.name}.cu written to {out}")
    print(
        f"evo: apply with: git am {out}/*.patch  (onto {out}/baseline-{cfg.family.name}.cu committed as "
        f"{cfg.family.name}.cu)"
    )
    if series is not None:
        from evo.report.tree_export import print_tree_summary

        print_tree_summary(series, out)
    if check:
        ok, lines = check_final(cfg, led.attempts(), led.all_meta(), out / f"{cfg.family.name}.cu", cfg.backend)
        for ln in lines:
            print(f"evo: check: {ln}")
        print(f"evo: check: {'passed' if ok else 'FAILED'}")
        return 0 if ok else 1
    return 0


def _ablate(cfg, rounds: int | None) -> int:
    """`evo ablate`: the champion against each of its changes set back alone (evo/loop/ablate.py), recorded in the
    ledger meta; the table printed, and the attempt log rewritten with it."""
    from evo.loop.ablate import AblateError, ablate
    from evo.loop.campaign import Campaign, CampaignError
    from evo.report.ablation import table
    from evo.report.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    if rounds is not None and rounds < 3:
        return _fail("--rounds: at least 3 (an interval needs them)")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]), replaying=True)
        camp.claim()
        try:
            record = ablate(camp, rounds)
        finally:
            camp.ledger.release()
    except (CampaignError, AblateError) as e:
        return _fail(str(e))
    sim = " (simulated from recorded H200 measurements)" if camp.simulated else ""
    print(
        f"evo: ablation of champion #{record['champion']} on the {record['backend']} backend{sim}: {record['method']}"
    )
    for line in table(record):
        print(line)
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    return 0


def _replay(cfg, gate: str | None, ids: list[int] | None) -> int:
    from evo.loop.campaign import Campaign, CampaignError
    from evo.loop.replay import replay
    from evo.report.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]), replaying=True)
        camp.claim()
        try:
            pairs = replay(camp, gate=gate, ids=ids)
        finally:
            camp.ledger.release()
    except CampaignError as e:
        return _fail(str(e))
    sim = " (simulated from recorded H200 measurements)" if camp.simulated else ""
    changed = [(o, n) for o, n in pairs if o.verdict.label() != n.verdict.label()]
    print(
        f"evo: replayed {len(pairs)} attempt(s) on the {camp.backend.name} backend{sim}; "
        f"{len(changed)} verdict(s) changed"
    )
    print(f"{'original':>9}  {'backend':<9} {'verdict then':<24} {'replay':>7}  {'verdict now':<24} reason now")
    for o, n in pairs:
        mark = "*" if o.verdict.label() != n.verdict.label() else " "
        print(
            f"{mark}{'#' + str(o.id):>8}  {o.backend:<9} {o.verdict.label():<24} {'#' + str(n.id):>7}  "
            f"{n.verdict.label():<24} {n.verdict.reason[:100]}"
        )
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    return 0


def _status(cfg) -> int:
    from evo.report.logmd import render_status

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg, readonly=True)
    attempts = led.attempts()
    _damaged(led)
    print(render_status(attempts, led.all_meta()))
    return 0


def _table(cfg, output: str | None) -> int:
    """`evo table`: one row per attempt and geometry, read from the ledger opened read-only."""
    from evo.report.table import TableError, attempt_rows, table_format, write_table

    path = Path(output).expanduser() if output else cfg.log_dir / "attempts.csv"
    try:
        fmt = table_format(path)  # before the ledger is read: a wrong name or a missing pyarrow costs nothing
    except TableError as e:
        return _fail(str(e))
    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg, readonly=True)
    attempts = led.attempts()
    _damaged(led)
    rows = attempt_rows(attempts, cfg.family, cfg.geometries)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(rows, path, fmt)
    print(f"evo: {len(rows)} row(s) ({len(attempts)} attempt(s) x {len(cfg.geometries)} geometries) written to {path}")
    return 0


def _log(cfg, output: str | None) -> int:
    from evo.report.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg, readonly=True)
    path = Path(output) if output else cfg.log_dir / "attempts.md"
    attempts = led.attempts()
    _damaged(led)
    write_log(attempts, led.all_meta(), path)
    print(f"evo: attempt log written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
