"""The search benchmark as users run it (issue 42, items 1, 2 and 4): evo's proposer as ``evo run`` deploys it, at
compile-ahead lag 0 and 1, against the best peer of each landscape chosen on other seeds, by ERT.

    python tools/bench_deployed.py --seeds 20 --select-seeds 10 --cap 150 --jobs 2 \\
        --landscape example=examples/fused_add_rmsnorm --landscape mhc_pre_decode=mhc_pre_decode \\
        --out benchmarks/results/2026-12-07-search-deployed

Per landscape (a family's recorded sweep, or ``LABEL=FAMILY:SWEEP``):

1. **Selection** (seeds ``--select-first`` ..): every peer (tools/search_bench.py's strategies but evo's own, and
   Optuna's GPSampler unless ``--strategies`` names it: slow on a CPU) runs; rows whose runs repeat another's on
   every seed are dropped as duplicates; the peer with the lowest ERT to within 2% is the landscape's best peer.
2. **Test** (seeds ``--first-seed`` .., disjoint from the selection's): evo's row (the config's proposer, made by
   ``evo run``'s factory: tools/bench_loop.py) at each ``--lags`` lag, and the chosen peer (lag 0: it runs as its
   own tool runs it).
3. **Metric** (tools/search_metrics.py): ERT to within 1%, 2% and 5% of the landscape's best (COCO: evaluations
   summed over all runs to the target or the cap, / successes), normalized regret after 10, 25 and 50 evaluations,
   evo's ERT₂% over the best peer's with a seed-bootstrap 95% interval, and over all landscapes the geometric mean
   with a two-level bootstrap (landscapes, then seeds).

Accounting, the same for every strategy: the baseline is evaluation 1 (``evo run`` measures it first; Kernel Tuner's
runs are charged it too); an evaluation is a GPU measurement (pre-GPU rejections are not); every strategy gets the
budget ``--cap``: evo's and Optuna's runs stop after ``--cap`` attempts, Kernel Tuner's get ``max_fevals`` = cap,
and any run is a failure after ``--cap`` evaluations; Kernel Tuner's value order is drawn per seed and its random
starts are seeded (tools/search_bench.py ``kt_tune_params``, ``_seeded_lhs``).

``--out DIR`` writes ``table.md`` (the tables) and ``runs.json.gz`` (every run's evaluations to each target, the
evaluations it made and its best-so-far objectives), with the command, date and machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gzip
import json
import math
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import search_bench as sb  # noqa: E402
from tools import search_metrics as sm  # noqa: E402
from tools.heldout import HeldoutError, read_list  # noqa: E402

TARGETS = (0.01, 0.02, 0.05)  # ERT to within each of these of the best; 2% is the bar's
REGRET_AT = (10, 25, 50)  # normalized regret after this many evaluations
DEFAULT_LANDSCAPES = (
    "fused_add_rmsnorm=examples/fused_add_rmsnorm",
    "mhc_pre_decode=mhc_pre_decode",
    "mhc_pre_big_fuse=mhc_pre_big_fuse",
    "moe_q2_matvec=moe_q2_matvec",
    "fp4_matvec=fp4_matvec",
    "mhc_prenorm_gemm=mhc_prenorm_gemm",
)
SLOW = ("optuna GP ordered",)  # left out unless --strategies names them (hundreds of seconds a landscape here)


@dataclasses.dataclass
class RunRecord:
    """One run as the tables read it: evaluations to each target (None: not reached), evaluations made, and the best
    objective found after each evaluation (up to the run's end)."""

    strategy: str
    seed: int
    to: dict[float, int | None]
    made: int
    best_found: list[float]
    pre_gpu: int

    def outcome(self, tol: float, cap: int) -> sm.Outcome:
        return sm.outcome(self.to.get(tol), self.made, cap)


def record(space: sb.Space, run: sb.Run) -> RunRecord:
    """A search_bench Run as a RunRecord (the objectives found so far, in the landscape's units)."""
    made = len(run.keys) - run.pre_gpu
    rel = sb.best_so_far(space, run, made)
    return RunRecord(
        run.strategy,
        run.seed,
        {t: run.evals_to(t) for t in TARGETS},
        made,
        [r * space.best for r in rel],
        run.pre_gpu,
    )


def peers(chosen: str | None) -> list[sb.Strategy]:
    """The peer strategies: every one of search_bench's but evo's own rows (and SLOW ones unless named)."""
    own = {s.label for s in sb.STRATEGIES if not s.peer}
    out = [s for s in sb.STRATEGIES if s.peer and s.label not in own]
    if chosen:
        want = {w.strip() for w in chosen.split(",")}
        return [s for s in out if s.label in want or s.name in want]
    return [s for s in out if s.label not in SLOW]


def with_budget(s: sb.Strategy, cap: int) -> sb.Strategy:
    """A Kernel Tuner strategy told the bench's budget (max_fevals = cap), as evo's and Optuna's runs are."""
    return dataclasses.replace(s, options={**s.options, "max_fevals": cap}) if s.kind == "kt" else s


def landscape_runs(space: sb.Space, args: argparse.Namespace, say: Any) -> dict[str, Any]:
    """Selection, choice of the best peer, test runs of evo (each lag) and of that peer, for one landscape."""
    quiet = lambda s: say("    " + s)  # noqa: E731
    strategies = [with_budget(s, args.cap) for s in peers(args.strategies)]
    sel, skipped = sb.bench(
        space, args.select_seeds, strategies, first_seed=args.select_first, cap=args.cap, jobs=args.jobs, out=quiet
    )
    kept, dup = sm.distinct_rows({k: [r.keys for r in v] for k, v in sel.items()})
    sel_rec = {k: [record(space, r) for r in sel[k]] for k in kept}
    ert_sel = {k: sm.ert([r.outcome(sb.HEADLINE, args.cap) for r in v]) for k, v in sel_rec.items()}
    best = sm.best_peer({k: [r.outcome(sb.HEADLINE, args.cap) for r in v] for k, v in sel_rec.items()})
    say(f"  best peer on seeds {args.select_first}..: {best} (ERT2% {ert_sel[best]:.1f})")
    test: dict[str, list[RunRecord]] = {}
    evo = next(s for s in sb.STRATEGIES if s.label == sb.EVO)
    for lag in args.lags:
        rs, _ = sb.bench(
            space,
            args.seeds,
            [evo],
            first_seed=args.first_seed,
            cap=args.cap,
            jobs=args.jobs,
            lag=lag,
            out=quiet,
            evo_options=getattr(args, "evo_options", None),
        )
        test[f"evo lag {lag}"] = [record(space, r) for r in rs[sb.EVO]]
    strat = next(s for s in strategies if s.label == best)
    rs, _ = sb.bench(space, args.seeds, [strat], first_seed=args.first_seed, cap=args.cap, jobs=args.jobs, out=quiet)
    test[best] = [record(space, r) for r in rs[best]]
    return {
        "selection": sel_rec,
        "ert_selection": ert_sel,
        "duplicates": dup,
        "skipped": skipped,
        "best": best,
        "test": test,
    }


def regret_cell(space: sb.Space, rs: list[RunRecord], n: int) -> float:
    """Mean normalized regret after n evaluations over the runs."""
    base = space.scores[space.baseline_key] or 1.0
    return sum(sm.regret(r.best_found, n, space.best, base) for r in rs) / len(rs)


def fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.1f}"


def landscape_table(label: str, space: sb.Space, got: dict[str, Any], cap: int) -> list[str]:
    """One landscape's rows: ERT to 1/2/5%, successes at 2%, regret at 10/25/50, per test row."""
    head = (
        " | ".join(f"ERT {100 * t:g}%" for t in TARGETS)
        + " | reached 2% | "
        + " | ".join(f"regret @{n}" for n in REGRET_AT)
    )
    lines = [f"| {label}: row | {head} |", "|---|" + "---:|" * (len(TARGETS) + 1 + len(REGRET_AT))]
    for row, rs in got["test"].items():
        erts = [fmt(sm.ert([r.outcome(t, cap) for r in rs])) for t in TARGETS]
        ok = sum(r.outcome(sb.HEADLINE, cap).success for r in rs)
        reg = [f"{regret_cell(space, rs, n):.3f}" for n in REGRET_AT]
        lines.append(f"| {row} | {' | '.join(erts)} | {ok}/{len(rs)} | {' | '.join(reg)} |")
    return lines


def summary(rows: list[tuple[str, sb.Space, dict[str, Any]]], args: argparse.Namespace) -> list[str]:
    """Per landscape and lag: evo's ERT2%, the best peer's, the ratio with its seed-bootstrap CI; then the geometric
    mean over the landscapes with the two-level bootstrap CI."""
    cap, out = args.cap, []
    out.append(
        "| landscape | best peer (chosen on the selection seeds) | its ERT2% | "
        + " | ".join(f"evo lag {lag} ERT2% | ratio (95% CI)" for lag in args.lags)
        + " |"
    )
    out.append("|---|---|---:|" + "---:|---:|" * len(args.lags))
    pairs: dict[int, list[tuple[list[sm.Outcome], list[sm.Outcome]]]] = {lag: [] for lag in args.lags}
    bars: dict[int, list[tuple[str, list[sm.Outcome], list[sm.Outcome], bool]]] = {lag: [] for lag in args.lags}
    for label, _space, got in rows:
        peer = [r.outcome(sb.HEADLINE, cap) for r in got["test"][got["best"]]]
        cells = []
        for lag in args.lags:
            evo = [r.outcome(sb.HEADLINE, cap) for r in got["test"][f"evo lag {lag}"]]
            pairs[lag].append((evo, peer))
            bars[lag].append((label, evo, peer, easy(got)))
            lo, hi = sm.bootstrap_one(evo, peer)
            cells.append(f"{fmt(sm.ert(evo))} | {sm.ratio(sm.ert(evo), sm.ert(peer)):.2f} ({lo:.2f}–{hi:.2f})")
        out.append(f"| {label} | {got['best']} | {fmt(sm.ert(peer))} | {' | '.join(cells)} |")
    out.append("")
    for lag in args.lags:
        g, lo, hi = sm.bootstrap_geomean(pairs[lag])
        worst = max(sm.ratio(sm.ert(a), sm.ert(b)) for a, b in pairs[lag])
        out.append(
            f"- evo lag {lag}: geometric mean of ERT2% ratios over {len(rows)} landscapes {g:.2f} "
            f"(two-level bootstrap 95% CI {lo:.2f}–{hi:.2f}); worst landscape {worst:.2f}"
        )
    for lag in args.lags:
        out += ["", f"Issue 42's bar, evo lag {lag}:", *sm.bar_lines(bars[lag])]
    return out


def easy(got: dict[str, Any]) -> bool:
    """An easy landscape (issue 42): random search expects < 30 evaluations (evo random's ERT2% on the selection
    seeds; unknown, so not easy, where evo random was not run)."""
    return got["ert_selection"].get("evo random", math.inf) < 30


def rescored(path: Path, cap: int) -> list[tuple[str, Any, dict[str, Any]]]:
    """The rows of a run written before (``runs.json.gz``), for :func:`summary` (``--rescore``: the tables of a
    committed run again, with what this code computes of them, without running anything)."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    rows = []
    for label, d in doc.items():
        got: dict[str, Any] = {"best": d["best_peer"]}
        for part in ("selection", "test"):
            got[part] = {
                k: [
                    RunRecord(
                        r["strategy"],
                        r["seed"],
                        {float(t): v for t, v in r["to"].items()},
                        r["made"],
                        r["best_found"] or [],
                        r["pre_gpu"],
                    )
                    for r in v
                ]
                for k, v in d["runs"][part].items()
            }
        got["ert_selection"] = {
            k: sm.ert([r.outcome(sb.HEADLINE, cap) for r in v]) for k, v in got["selection"].items()
        }
        rows.append((label, None, got))
    return rows


def landscape_specs(args: argparse.Namespace) -> list[str]:
    """The ``LABEL=FAMILY[:SWEEP]`` (or ``LABEL=CACHE.json[.gz]``) landscapes to run: ``--landscape`` ones, then the
    ``--heldout`` list's caches found in ``--cache-dir`` (their sha256 checked: tools/heldout.py); the six committed
    landscapes when neither is given. Raises HeldoutError."""
    specs = list(args.landscape or [])
    args.sources = {}
    if args.heldout:
        for c in read_list(args.heldout, args.cache_dir):
            specs.append(f"{c.label}={c.path}")
            args.sources[c.label] = f"{c.source} (sha256 {c.sha256}; recorded on {c.device_name})"
    return specs or list(DEFAULT_LANDSCAPES)


def parse_options(ap: argparse.ArgumentParser, text: str | None) -> dict[str, Any] | None:
    """``--options``: a JSON object of surrogate options, checked before any run (not after the first landscape's
    selection runs); anything else is a usage error (exit 2)."""
    if not text:
        return None
    try:
        opts = json.loads(text)
    except json.JSONDecodeError as e:
        ap.error(f"--options is not JSON: {e}")
    if not isinstance(opts, dict):
        ap.error("--options: a JSON object of surrogate options, e.g. '{\"portfolio\": 0}'")
    from evo.search import Surrogate

    unknown = sorted(set(opts) - set(Surrogate.OPTIONS))
    if unknown:
        ap.error(f"--options: not a surrogate option: {', '.join(unknown)} (docs/config.md lists them)")
    try:
        Surrogate.validate_options(opts)
    except ValueError as e:
        ap.error(f"--options: {e}")
    return opts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--landscape", action="append", default=None, metavar="LABEL=FAMILY[:SWEEP]")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--select-seeds", type=int, default=10)
    ap.add_argument("--select-first", type=int, default=1000)
    ap.add_argument("--cap", type=int, default=150, help="evaluations (and attempts) every strategy's run may use")
    ap.add_argument("--lags", default="0,1", help="compile-ahead lags of evo's row (0: off a GPU; 1: evo run on one)")
    ap.add_argument("--strategies", default=None, help="peer labels (default: every peer but " + ", ".join(SLOW) + ")")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="a folder for table.md and runs.json.gz")
    ap.add_argument("--rescore", default=None, help="a runs.json.gz written before: print its summary, run nothing")
    ap.add_argument(
        "--heldout",
        default=None,
        metavar="LIST",
        help="a frozen list of Kernel Tuner caches "
        "(benchmarks/heldout/ktcaches.json): its landscapes, after any --landscape, sha256 checked",
    )
    ap.add_argument("--cache-dir", default=".", help="the folder holding the list's cache files (outside the repo)")
    ap.add_argument(
        "--options",
        default=None,
        metavar="JSON",
        help="evo's row: surrogate options over the deployed config's (an option not yet the default, tested as "
        "users would set it)",
    )
    args = ap.parse_args(argv)
    args.evo_options = parse_options(ap, args.options)
    try:
        args.specs = landscape_specs(args)
    except HeldoutError as e:
        print(f"bench_deployed: {e}", file=sys.stderr)
        return 2
    args.lags = [int(x) for x in args.lags.split(",")]
    if args.rescore:
        print("\n".join(summary(rescored(Path(args.rescore), args.cap), args)))
        return 0
    if set(range(args.first_seed, args.first_seed + args.seeds)) & set(
        range(args.select_first, args.select_first + args.select_seeds)
    ):
        ap.error("the test seeds overlap the selection seeds")
    t0 = time.perf_counter()
    rows = []
    for spec in args.specs:
        label, _, where = spec.partition("=")
        fam, _, sweep = where.partition(":")
        space = sb.load_space(fam or label, sweep or None)
        print(f"== {label}: {space.size} genomes, best {space.best:.4f}x, mode {space.mode}", flush=True)
        t1 = time.perf_counter()
        got = landscape_runs(space, args, lambda s: print(s, flush=True))
        got["seconds"] = time.perf_counter() - t1
        rows.append((label, space, got))
        print("\n".join(landscape_table(label, space, got, args.cap)), flush=True)
        if args.out:  # after every landscape: a long run stopped part-way keeps what it measured
            write(Path(args.out), rows, summary(rows, args), args, time.perf_counter() - t0)
    print("\n".join(summary(rows, args)))
    return 0


def write(out: Path, rows: list[tuple[str, sb.Space, dict[str, Any]]], text: list[str], args: Any, secs: float) -> None:
    """table.md (command, date, machine, the tables) and runs.json.gz (every run) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    head = [
        f"Command: `python tools/bench_deployed.py {shlex.join(sys.argv[1:])}`  ",
        f"Date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}; {secs:.0f} s  ",
        f"Machine: {platform.machine()} {platform.processor() or ''}, {platform.python_version()}, CPU only "
        f"(recorded sweeps); kernel_tuner {sb._dist_version('kernel_tuner')}, optuna {sb._dist_version('optuna')}  ",
        f"Seeds: test {args.first_seed}..{args.first_seed + args.seeds - 1}, selection {args.select_first}.."
        f"{args.select_first + args.select_seeds - 1}; cap {args.cap} evaluations; lags {args.lags}"
        + (
            f"; evo's options over the deployed config's: {json.dumps(opts)}"
            if (opts := getattr(args, "evo_options", None))
            else ""
        ),
        "",
        *text,
        "",
    ]
    for label, space, got in rows:
        head += landscape_table(label, space, got, args.cap) + [""]
        sel = ", ".join(f"{k} {fmt(v)}" for k, v in sorted(got["ert_selection"].items(), key=lambda kv: kv[1]))
        head.append(f"- {label}: peers' ERT2% on the selection seeds: {sel}")
        for k, v in got["duplicates"].items():
            head.append(f"- {label}: {k} dropped: its runs repeat {v}'s on every selection seed")
        for k, v in got["skipped"].items():
            head.append(f"- {label}: skipped {k}: {v}")
        head.append(f"- {label}: sweep {space.sweep_path.name}, {space.size} genomes, {got['seconds']:.0f} s")
        if label in getattr(args, "sources", {}):
            head.append(f"- {label}: from {args.sources[label]}")
        head.append("")
    (out / "table.md").write_text("\n".join(head))

    def rec(r: RunRecord, curve: bool) -> dict[str, Any]:
        d = dataclasses.asdict(r)
        d["best_found"] = [round(x, 5) for x in r.best_found] if curve else None  # (the test runs' curves only)
        return d

    doc = {
        label: {
            "sweep": str(
                space.sweep_path.relative_to(ROOT) if space.sweep_path.is_relative_to(ROOT) else space.sweep_path
            ),
            "best": space.best,
            "best_peer": got["best"],
            "runs": {
                part: {k: [rec(r, part == "test") for r in v] for k, v in got[part].items()}
                for part in ("selection", "test")
            },
        }
        for label, space, got in rows
    }
    with gzip.open(out / "runs.json.gz", "wt") as f:  # (over 32 KiB: gzipped, benchmarks/results/README.md)
        json.dump(doc, f, default=str)


if __name__ == "__main__":
    sys.exit(main())
