"""The commands that read a campaign's ledger (opened read-only): status, log, table, export (and --tree)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evo.cli.common import Command, _damaged, _existing, _fail, _open_ledger, campaign_args, json_arg, result


def _status_parser(sub) -> None:
    s = sub.add_parser("status", help="summarize a campaign")
    campaign_args(s)
    json_arg(s)


def _log_parser(sub) -> None:
    s = sub.add_parser("log", help="write the markdown attempt log")
    campaign_args(s)
    s.add_argument("-o", "--output", help="where to write (default logs/<campaign>/attempts.md)")


def _table_parser(sub) -> None:
    tb = sub.add_parser("table", help="every attempt at every geometry as a CSV or parquet table")
    campaign_args(tb)
    tb.add_argument(
        "-o", "--output", help="a .csv or .parquet file (default logs/<campaign>/attempts.csv); parquet needs pyarrow"
    )
    tb.add_argument(
        "--as",
        dest="as_format",
        choices=("nvbench", "kernel-tuner"),
        help="instead: nvbench-style JSON, or a Kernel Tuner cache of one geometry (-o: a .json file)",
    )
    tb.add_argument("--geometry", help="--as kernel-tuner: the geometry (default: the first weighted one)")


def _export_parser(sub) -> None:
    e = sub.add_parser("export", help="accepted steps as a git-am patch series, plus the final kernel")
    campaign_args(e)
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
    json_arg(e)


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
    result(output=str(out), patches=[str(p) for p in patches], final=str(out / f"{cfg.family.name}.cu"), notes=notes)
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
        result(check={"ok": ok, "lines": lines})
        return 0 if ok else 1
    return 0


def _status(cfg) -> int:
    from evo.report.logmd import render_status

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg, readonly=True)
    attempts = led.attempts()
    _damaged(led)
    meta = led.all_meta()
    print(render_status(attempts, meta))
    from evo.report.documents import status_document

    result(**status_document(attempts, meta))
    return 0


def _table(cfg, args: Any) -> int:
    """`evo table`: one row per attempt and geometry, read from the ledger opened read-only (``--as``: another
    tool's format, evo/report/interop.py)."""
    from evo.report.table import TableError, attempt_rows, table_format, write_table

    if args.as_format:
        return _interop(cfg, args.as_format, args.output, args.geometry)
    output = args.output

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
    rows = attempt_rows(attempts, cfg.family, cfg.geometries, (led.all_meta().get("device") or {}).get("name"))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(rows, path, fmt)
    print(f"evo: {len(rows)} row(s) ({len(attempts)} attempt(s) x {len(cfg.geometries)} geometries) written to {path}")
    return 0


def _interop(cfg, fmt: str, output: str | None, geometry: str | None) -> int:
    """`evo table --as nvbench|kernel-tuner`: the attempts as another tool's JSON, written whole (temporary file and
    rename) to ``-o`` or logs/<campaign>/attempts.<fmt>.json."""
    import json

    from evo.report.interop import nvbench_json

    geos = {g.name: g for g in cfg.geometries}
    if geometry is not None and geometry not in geos:
        return _fail(f"--geometry {geometry}: the campaign's geometries are {', '.join(geos)}")
    path = Path(output).expanduser() if output else cfg.log_dir / f"attempts.{fmt}.json"
    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg, readonly=True)
    attempts = led.attempts()
    _damaged(led)
    device = (led.all_meta().get("device") or {}).get("name") or ""
    if fmt == "kernel-tuner":  # one writer of Kernel Tuner caches: `evo kt-cache --ledger`'s (harness/ktcache_write.py)
        from harness.ktcache_write import KTWriteError, ledger_to_kt_cache, write_kt_cache

        g = geos[geometry] if geometry else next((x for x in cfg.geometries if x.weight > 0), cfg.geometries[0])
        meta_device = led.all_meta().get("device") or {}
        doc, left = ledger_to_kt_cache(cfg.family, g, sorted(attempts, key=lambda a: a.id), meta_device)
        try:
            write_kt_cache(path, doc)
        except KTWriteError as e:
            return _fail(str(e))
        why = "never measured at the geometry, or with ideas (no knob value says them)" if left else ""
        print(f"evo: {len(doc['cache'])} configuration(s) at {g.name} written to {path} ({fmt}){_left(left, why)}")
        result(output=str(path), format=fmt, left_out=left)
        return 0
    conv = nvbench_json(attempts, cfg.family, cfg.geometries, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(conv.doc, indent=1) + "\n")
    os.replace(tmp, path)
    what = f"{len(conv.doc['benchmarks'][0]['states'])} state(s)"
    print(f"evo: {what} written to {path} ({fmt}){_left(conv.left_out, conv.why)}")
    result(output=str(path), format=fmt, left_out=conv.left_out)
    return 0


def _left(n: int, why: str) -> str:
    return f"; {n} attempt(s) left out: {why}" if n else ""


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


STATUS = Command(_status_parser, lambda cfg, args: _status(cfg))
LOG = Command(_log_parser, lambda cfg, args: _log(cfg, args.output))
TABLE = Command(_table_parser, _table)
EXPORT = Command(_export_parser, lambda cfg, args: _export(cfg, args.output, args.check, args.force, args.tree))
