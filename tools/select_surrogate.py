"""Leave-one-family-out selection of the surrogate's options, and its held-out numbers.

    python tools/select_surrogate.py [--seeds 8] [--first-seed 100] [--cap 300] [--out results.json]

The grid (:data:`GRID`) is every combination of a few values of the options that decide the surrogate's search
(``fit_ordinal``: the trend's size chosen by the attempts' marginal likelihood, as ``fit`` chooses the others;
``ordinal``: the trend along numeric knobs, fixed or where the fit starts; ``noise``; ``local``: a high-order term),
others at their defaults. A combination that differs from an earlier one only in an option without effect
(``fit_draw`` or ``fit_ordinal`` without ``fit``) is run once. Each setting runs on every
recorded sweep (:data:`FAMILIES`) with the selection seeds (``--first-seed`` .., 100.. by default: never the seeds
the tables report, 0..). Its score on a set of families is the geometric mean of
its median evaluations to within 2% of each sweep's best (the bench's headline target; a run that missed it within
``--cap`` attempts counts as one evaluation more than it made).

* Per fold: the setting with the best score on three families is chosen (ties: the earlier in the grid), and the
  held-out family is what it is judged on, by tools/search_bench.py with ``--surrogate-options`` set to it.
* Shipped: the setting with the best score on all four is what ``Surrogate.OPTIONS`` should default to; its numbers
  on those four sweeps are selection, not evidence (the held-out ones are).

Prints one line per setting and family, then the choices; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evo.search import Surrogate  # noqa: E402
from tools import search_bench as sb  # noqa: E402

FAMILIES = ("mhc_pre_big_fuse", "moe_q2_matvec", "fp4_matvec", "mhc_prenorm_gemm")
# the third selection's grid (issue 32); the second's was fit x fit_draw x noise (0.02, 0.05) x ordinal (0.5, 1.0)
GRID: dict[str, tuple[Any, ...]] = {
    "fit_ordinal": (False, True),
    "ordinal": (1.0, 2.0),
    "noise": (0.01, 0.02),
    "local": (0.0, 0.5),
}


REQUIRES = {"fit_draw": "fit", "fit_ordinal": "fit"}  # an option that acts only when another is on


def settings(grid: dict[str, tuple[Any, ...]] = GRID) -> list[dict[str, Any]]:
    """Every combination of the grid, less repeats: a combination that runs as an earlier one does (it differs only
    in an option whose prerequisite is off) is left out."""
    out, runs = [], set()
    for vals in itertools.product(*grid.values()):
        s = dict(zip(grid, vals))
        ran = {k: (v if not (k in REQUIRES and s.get(REQUIRES[k]) is False) else None) for k, v in s.items()}
        key = json.dumps(ran, sort_keys=True)
        if key not in runs:
            runs.add(key)
            out.append(s)
    return out


def name(s: dict[str, Any]) -> str:
    return json.dumps(s, sort_keys=True)


def score(medians: dict[str, float], families: list[str] | tuple[str, ...]) -> float:
    """Geometric mean of the medians over the families."""
    return math.exp(sum(math.log(medians[f]) for f in families) / len(families))


def choose(table: dict[str, dict[str, float]], families: list[str] | tuple[str, ...]) -> str:
    """The setting (its name) with the lowest score on the families; ties go to the earlier setting."""
    best, best_score = "", math.inf
    for s, medians in table.items():
        v = score(medians, families)
        if v < best_score - 1e-12:
            best, best_score = s, v
    return best


def folds(table: dict[str, dict[str, float]], families: tuple[str, ...] = FAMILIES) -> dict[str, str]:
    """Held-out family -> the setting chosen on the others (none with one family: nothing to choose on)."""
    if len(families) < 2:
        return {}
    return {h: choose(table, [f for f in families if f != h]) for h in families}


def medians(spaces: dict[str, sb.Space], setting: dict[str, Any], seeds: range, cap: int) -> dict[str, float]:
    out = {}
    for fam, space in spaces.items():
        runs = [
            sb.run_proposer(space, "surrogate", seed, setting, cap=min(cap, space.size), tol=sb.HEADLINE)
            for seed in seeds
        ]
        out[fam] = sb.stats(runs, space.size, sb.HEADLINE)["median"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--first-seed", type=int, default=100)
    ap.add_argument("--cap", type=int, default=300, help="attempts per selection run, at most")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--out", default=None, help="write the table and the choices as JSON")
    ap.add_argument(
        "--grid",
        default=None,
        help="another grid, as JSON (option -> list of values), e.g. to try an option the shipped grid lacks: "
        '\'{"screen": [true], "calibrate": [false], "effect": [0.15], "sample": [0.0]}\'',
    )
    args = ap.parse_args(argv)
    grid = GRID
    if args.grid:
        try:
            raw = json.loads(args.grid)
        except json.JSONDecodeError as e:
            ap.error(f"--grid: not JSON ({e})")
        if not isinstance(raw, dict) or not all(isinstance(v, list) and v for v in raw.values()):
            ap.error("--grid: expected an object of non-empty lists, e.g. '{\"effect\": [0.1, 0.15]}'")
        unknown = sorted(set(raw) - set(Surrogate.OPTIONS))
        if unknown:
            ap.error(f"--grid: {unknown[0]!r} is not an option of the surrogate")
        grid = {k: tuple(v) for k, v in raw.items()}
    fams = tuple(f.strip() for f in args.families.split(","))
    spaces = {f: sb.load_space(f) for f in fams}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    table: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for s in settings(grid):
        table[name(s)] = medians(spaces, s, seeds, args.cap)
        print(
            f"{name(s)}: "
            + ", ".join(f"{f} {sb._fmt(m)}" for f, m in table[name(s)].items())
            + f"; geometric mean {score(table[name(s)], fams):.1f} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    chosen = folds(table, fams)
    shipped = choose(table, fams)
    print()
    for h, s in chosen.items():
        train = [f for f in fams if f != h]
        print(
            f"held out {h}: chosen on {', '.join(train)}: {s} (score {score(table[s], train):.1f}); "
            f"its median on {h} with the selection seeds: {sb._fmt(table[s][h])}"
        )
    print(f"chosen on all {len(fams)} (to ship): {shipped} (score {score(table[shipped], fams):.1f})")
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "grid": grid,
                    "seeds": [seeds.start, seeds.stop - 1],
                    "cap": args.cap,
                    "target": sb.HEADLINE,
                    "table": table,
                    "folds": chosen,
                    "shipped": shipped,
                },
                indent=1,
            )
            + "\n"
        )
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
