"""The held-out table: on each recorded sweep, the surrogate with the options chosen without that sweep, vs peers.

    python tools/select_surrogate.py --out docs/search-efficiency-runs/surrogate-lofo-selection.json
    python tools/heldout_table.py --selection docs/search-efficiency-runs/surrogate-lofo-selection.json \
        --seeds 10 --cap 200 --out docs/search-efficiency-runs/heldout-table.md --curves docs/search-efficiency-runs

For every family of the selection's folds: tools/search_bench.py's ``bench`` with every strategy, the surrogate
row given the fold's options (chosen on the three other sweeps, with other seeds), seeds 0.. (never the selection
seeds). Prints and writes (``--out``) one summary row per family (median evaluations to within 2% of the best, the
best peer's, their ratio with its bootstrap 95% interval, whether the bar holds) and each family's full table;
``--curves DIR`` writes each family's mean best-so-far curves as ``DIR/heldout-curves-<family>.csv``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import search_bench as sb  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--selection", required=True, help="the JSON tools/select_surrogate.py --out wrote")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=None, help="attempts per run of evo's and Optuna's strategies")
    ap.add_argument(
        "--families",
        default=None,
        help="comma-separated (default: every fold of the selection; '': none, only --landscape)",
    )
    ap.add_argument(
        "--landscape",
        action="append",
        default=[],
        metavar="LABEL=FAMILY[:SWEEP]",
        help="also a landscape no selection used (a new sweep, a synthetic one: tools/synth_landscape.py), the "
        "surrogate with the shipped options (chosen on all four folds); repeatable; FAMILY alone: its recorded sweep",
    )
    ap.add_argument("--strategies", default=None, help="comma-separated labels (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the seeds of evo's and Optuna's rows")
    ap.add_argument("--out", default=None)
    ap.add_argument("--curves", default=None, help="a folder for the curves' CSV files")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error("--jobs: at least 1")
    sel = json.loads(Path(args.selection).read_text())
    lo, hi = sel["seeds"]
    if args.first_seed <= hi and lo <= args.first_seed + args.seeds - 1:
        ap.error(f"the seeds overlap the selection seeds {lo}..{hi}")
    fams = (
        [f.strip() for f in args.families.split(",") if f.strip()] if args.families is not None else list(sel["folds"])
    )
    # (label, family, sweep file or None, the surrogate's options as JSON text, what the options column says)
    rows: list[tuple[str, str, str | None, str, str]] = [
        (f, f, None, sel["folds"][f], f"`{sel['folds'][f]}`") for f in fams
    ]
    for spec in args.landscape:
        label, _, where = spec.partition("=")
        fam, _, file = where.partition(":")
        if not label or not fam:
            ap.error(f"--landscape {spec!r}: expected LABEL=FAMILY[:SWEEP]")
        rows.append((label, fam, file or None, sel["shipped"], f"shipped `{sel['shipped']}` (all four folds)"))
    chosen = sb.STRATEGIES
    if args.strategies:
        want = {w.strip() for w in args.strategies.split(",")}
        chosen = [s for s in sb.STRATEGIES if s.label in want or s.label == sb.EVO]
    pct = f"{100 * sb.HEADLINE:g}%"
    summary = [
        f"| family (held out) | surrogate options (chosen on the other three) | surrogate to {pct} | best peer | "
        f"best peer to {pct} | ratio (95% CI) | peers | bar |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    blocks: list[str] = []
    for fam, family, file, opts, opts_text in rows:
        t0 = time.perf_counter()
        options = json.loads(opts)
        space = sb.load_space(family, file)
        print(f"== {fam}: surrogate options {options}", flush=True)
        runs, skipped = sb.bench(
            space,
            args.seeds,
            chosen,
            first_seed=args.first_seed,
            evo_options=options,
            cap=args.cap,
            jobs=args.jobs,
            out=lambda s: print("  " + s, flush=True),
        )
        r = sb.ratios(runs, space.size)[sb.HEADLINE]
        met = r["ratio"] <= 0.5 and r["hi"] < 1.0 and r["peers"] >= 8
        summary.append(
            f"| {fam} | {opts_text} | {sb._fmt(r['evo'])} | {r['peer']} | {sb._fmt(r['peer_median'])} | "
            f"{r['ratio']:.2f} ({r['lo']:.2f}–{r['hi']:.2f}) | {r['peers']} | {'met' if met else '**not met**'} |"
        )
        lines = sb.targets_table(runs, space.size)
        sweep = space.sweep_path.relative_to(ROOT) if space.sweep_path.is_relative_to(ROOT) else space.sweep_path
        blocks += [
            f"### {fam}",
            "",
            f"Sweep `{sweep}` ({space.size} genomes; best {space.best:.4f}x); seeds {args.first_seed}.."
            f"{args.first_seed + args.seeds - 1}; cap {args.cap or 'none'}; correctness mode {space.mode}; "
            f"surrogate options {opts}; {time.perf_counter() - t0:.0f} s",
            "",
            *lines,
            "",
            *[f"- {s}" for s in sb.ratio_lines(runs, space.size)],
            *[f"- skipped {k}: {why}" for k, why in skipped.items()],
            "",
        ]
        print("\n".join(blocks[-len(lines) - 6 :]), flush=True)
        if args.curves:
            path = Path(args.curves) / f"heldout-curves-{fam}.csv"
            sb.write_curves(path, space, runs)
            print(f"wrote {path}")
    text = "\n".join(
        [
            f"Command: `python tools/heldout_table.py {' '.join(sys.argv[1:])}`",
            "",
            *summary,
            "",
            *blocks,
        ]
    )
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
