"""`evo kt-cache`: a recorded sweep written as a Kernel Tuner cache file (harness/ktcache_write.py), for Kernel
Tuner's simulation mode (``tune_kernel(..., simulation_mode=True, cache=PATH)``) and KTdashboard. The other
direction needs no command: a config's ``family:`` may name a Kernel Tuner cache (docs/kernel-tuner.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evo.cli.common import Command, _fail, json_arg, result


def _parser(sub) -> None:
    k = sub.add_parser(
        "kt-cache",
        help="write a family's recorded sweep as a Kernel Tuner cache file (simulation mode, KTdashboard)",
    )
    k.add_argument(
        "source",
        help="a family (name or folder: its recorded sweep) or a sweep file (.json.xz / .json.gz from tools/sweep.py)",
    )
    k.add_argument("-o", "--output", required=True, help="the cache file to write (.json, or .json.gz compressed)")
    k.add_argument(
        "--geometry",
        help="the sweep geometry to write (a cache holds one problem size; default: the first weighted one)",
    )
    k.add_argument(
        "--ledger",
        action="store_true",
        help="SOURCE is a campaign config: write the configurations its campaign measured, in the order it measured "
        "them (for KTdashboard; simulation mode needs a whole sweep)",
    )
    k.add_argument("--family", help="the family of a sweep file, where its recorded name does not find it (a path)")
    k.add_argument(
        "--mode",
        choices=("tolerance", "exact"),
        default="tolerance",
        help="which correctness gate decides that a genome's time is usable (default tolerance, factor 2)",
    )
    k.add_argument("--force", action="store_true", help="replace an existing file at OUTPUT")
    json_arg(k)


def _sweep(source: str, family_ref: str | None) -> tuple[Any, dict[str, Any], Path]:
    """The family and the sweep ``source`` names (raises FamilyError or SweepFileError, one line each)."""
    from evo.core.errors import FamilyError
    from evo.core.family import load_family
    from harness.sweepfile import SUFFIXES, load, sweep_files

    if any(source.endswith(s) for s in SUFFIXES):
        path = Path(source).expanduser()
        data = load(path)
        family = load_family(family_ref or str(data["family"]))
        return family, data, path
    family = load_family(family_ref or source)
    paths = sweep_files(family.folder / "recorded")
    if not paths:
        raise FamilyError(f"family {family.name} has no recorded sweep under {family.folder / 'recorded'}")
    return family, load(paths[0]), paths[0]


def _from_ledger(args, out: Path) -> int:
    """`evo kt-cache CONFIG --ledger`: the campaign's measured attempts at one geometry."""
    from evo.cli.common import _existing, _open_ledger
    from evo.config import load_config
    from harness.ktcache_write import ledger_to_kt_cache, write_kt_cache

    cfg = load_config(args.source)
    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    geos = [g for g in cfg.geometries if args.geometry in (None, g.name)]
    geo = next((g for g in geos if g.weight > 0), geos[0] if geos else None)
    if geo is None:
        names = ", ".join(g.name for g in cfg.geometries)
        return _fail(f"--geometry {args.geometry}: not a geometry of {cfg.campaign} ({names})")
    led = _open_ledger(cfg, readonly=True)
    attempts = sorted(led.attempts(), key=lambda a: a.id)
    doc, left = ledger_to_kt_cache(cfg.family, geo, attempts, led.meta("device") or {})
    write_kt_cache(out, doc)
    print(
        f"evo: wrote {out}: {len(doc['cache'])} configurations campaign {cfg.campaign} measured at {geo.name}, in "
        f"its order ({left} attempt(s) never measured or with ideas left out), device {doc['device_name']}"
    )
    result(path=str(out), campaign=cfg.campaign, geometry=geo.name, configurations=len(doc["cache"]), left_out=left)
    return 0


def _run(args) -> int:
    from evo.config import ConfigError
    from evo.core.errors import FamilyError
    from harness.ktcache_write import KTWriteError, sweep_to_kt_cache, write_kt_cache
    from harness.sweepfile import SweepFileError

    out = Path(args.output).expanduser()
    if out.exists() and not args.force:
        return _fail(f"{out} exists; give --force to replace it")
    if args.ledger:
        try:
            return _from_ledger(args, out)
        except (ConfigError, KTWriteError) as e:
            return _fail(str(e))
    try:
        family, data, path = _sweep(args.source, args.family)
        doc = sweep_to_kt_cache(family, data, args.geometry, args.mode)
        write_kt_cache(out, doc)
    except (FamilyError, SweepFileError, KTWriteError) as e:
        return _fail(str(e))
    entries = doc["cache"].values()
    valid = sum(1 for e in entries if not isinstance(e["time"], str))
    geo = doc["evo"]["geometry"]["name"]
    plain = str(out)[: -len(".gz")] if out.name.endswith(".gz") else str(out)
    gz = " after gunzip (Kernel Tuner 1.5 reads plain .json)" if plain != str(out) else ""
    print(
        f"evo: wrote {out}: {len(doc['cache'])} configurations of {family.name} ({valid} with a time) at {geo} "
        f"from {path.name}, device {doc['device_name']}; replay it{gz} with kernel_tuner.tune_kernel("
        f"{doc['kernel_name']!r}, '', {tuple(doc['problem_size'])!r}, [], tune_params, simulation_mode=True, "
        f"cache={plain!r}) (docs/kernel-tuner.md)"
    )
    result(
        path=str(out),
        family=family.name,
        sweep=str(path),
        geometry=geo,
        configurations=len(doc["cache"]),
        valid=valid,
        device_name=doc["device_name"],
        kernel_name=doc["kernel_name"],
        problem_size=doc["problem_size"],
        tune_params_keys=doc["tune_params_keys"],
    )
    return 0


KT_CACHE = Command(_parser, _run, campaign=False)
