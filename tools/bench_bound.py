"""A lower bound on a strategy's median evaluations, for strategies too slow to run to the end.

    python tools/bench_bound.py --family mhc_prenorm_gemm --strategy tpe --cap 107 [--seeds 20]

Runs each seed as tools/search_bench.py does (same proposer, options, tabu and SASS digests), but stops it after
``--cap`` evaluations. Of n runs sorted by their evaluations, the median is the mean of the two middle ones; when
at most n/2 - 1 runs (n even; (n - 1)/2 for n odd) reached the target within the cap, both middle runs needed more
than the cap, so the median is at least cap + 1; when both middle runs reached it, the median is exact (a
capped run that reached the target is the uncapped run: every run is seeded). Prints each seed's result and that
conclusion, or says the bound does not follow. The Optuna peers on mhc_prenorm_gemm take more than 9 minutes per
seed to run to the end (each proposal asks up to 100 times;
benchmarks/results/2026-12-01-search-bench-h200-cores); their runs to a cap are what this is for.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import search_bench as sb  # noqa: E402


def median_at_least(reached: int, n: int, cap: int) -> int | None:
    """cap + 1 when so few of n runs reached the target within cap that both middle runs did not, else None."""
    middle_low = (n - 1) // 2  # 0-based index of the lower middle run (of the only one, n odd)
    return cap + 1 if reached <= middle_low else None


def exact_median(evals: list[int], n: int) -> float | None:
    """The median of n runs when the runs that reached the target (their evaluations: ``evals``) include both
    middle ones (a run stopped at the cap needed more than every run that reached it), else None."""
    if len(evals) < n // 2 + 1:
        return None
    return sb._quantile(sorted(evals) + [math.inf] * (n - len(evals)), 0.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", required=True)
    ap.add_argument("--strategy", required=True, help="one of evo's proposer names: tpe, nsga2, random, ...")
    ap.add_argument("--cap", type=int, required=True, help="evaluations per run, at most")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    args = ap.parse_args(argv)
    space = sb.load_space(args.family)
    strat = next((s for s in sb.STRATEGIES if s.kind == "evo" and s.name == args.strategy), None)
    if strat is None:
        ap.error(f"--strategy: one of {', '.join(s.name for s in sb.STRATEGIES if s.kind == 'evo')}")
    if not 1 <= args.cap <= space.size:
        ap.error(f"--cap: 1..{space.size}")
    reached: list[int] = []
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        r = sb.run_proposer(space, strat.name, seed, dict(strat.options), cap=args.cap)
        if r.ok:
            reached.append(r.evals)
        print(
            f"seed {seed}: {f'reached the target at evaluation {r.evals}' if r.ok else f'not within {args.cap}'}"
            f" ({len(r.keys)} evaluations, {time.perf_counter() - t0:.0f} s so far)",
            flush=True,
        )
    bound = median_at_least(len(reached), args.seeds, args.cap)
    exact = exact_median(reached, args.seeds)
    print(
        f"{strat.label} on {args.family}: {len(reached)} of {args.seeds} runs reached the target within {args.cap} "
        f"evaluations; "
        + (
            f"median >= {bound}"
            if bound
            else f"median = {sb._fmt(exact)} (both middle runs reached it within the cap)"
            if exact is not None
            else "no bound on the median follows"
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
