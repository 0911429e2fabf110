"""Development loop for the search (session 29): evo's deployed row alone, at compile-ahead lag 1, on Kernel Tuner
caches, with surrogate options over the shipped ones; prints ERT to within 2% and the failed proposals.

    python tools/evo_row.py --seeds 4 --options '{"fail_model": true}' DIR/pnpoly_RTX_Titan.json.gz ...

No selection: it compares options of evo's own proposer (tools/bench_deployed.py is the benchmark). ``--peers``
runs the named peers instead (with the bench's budget, on the same seeds), to see where evo is behind:

    python tools/evo_row.py --seeds 4 --peers "kt diff_evo,optuna TPE ordered" DIR/pnpoly_RTX_Titan.json.gz ...
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
from tools import search_metrics as sm  # noqa: E402
from tools.bench_deployed import peers, with_budget  # noqa: E402

FIRST = 60  # failed proposals are counted among the first this many


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("caches", nargs="+")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=150)
    ap.add_argument("--options", default=None, help="surrogate options (JSON) over the deployed config's")
    ap.add_argument("--peers", default=None, help="peer labels (tools/search_bench.py) to run instead of evo's row")
    ap.add_argument("--out", default=None, help="a JSON file for the per-landscape numbers")
    args = ap.parse_args(argv)
    opts = json.loads(args.options) if args.options else None
    evo = next(s for s in sb.STRATEGIES if s.label == sb.EVO)
    rows = [with_budget(s, args.cap) for s in peers(args.peers)] if args.peers else [evo]
    res: dict[str, dict] = {}
    for path in args.caches:
        space = sb.load_space(path, None)
        label = Path(path).name.split(".")[0]
        for row in rows:
            t0 = time.perf_counter()
            lag = 1 if row is evo else 0  # a peer runs as its own tool runs it (bench_deployed's rule)
            rs, skipped = sb.bench(
                space,
                args.seeds,
                [row],
                first_seed=args.first_seed,
                cap=args.cap,
                lag=lag,
                out=lambda s: None,
                evo_options=opts,
            )
            if row.label in skipped:
                print(f"{label} {row.label}: skipped ({skipped[row.label]})", flush=True)
                continue
            r = summarize(space, rs[row.label], args.cap, time.perf_counter() - t0)
            res[label if row is evo else f"{label} | {row.label}"] = r
            print(
                f"{label} {row.label}: ERT2% {r['ert2']:.1f} to={r['to2']} failed/{FIRST}={r['failed_first']}",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


def summarize(space: sb.Space, runs: list, cap: int, seconds: float) -> dict:
    """One row's numbers on one landscape: ERT to within 2%, evaluations to it per seed, failed proposals early."""
    outs = [sm.outcome(r.evals_to(0.02), len(r.keys) - r.pre_gpu, cap) for r in runs]
    return {
        "ert2": sm.ert(outs),
        "to2": [r.evals_to(0.02) for r in runs],
        "failed_first": [sum(space.scores.get(k) is None for k in r.keys[:FIRST]) for r in runs],
        "seconds": seconds,
    }


if __name__ == "__main__":
    raise SystemExit(main())
