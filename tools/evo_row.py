"""Development loop for the search (session 29): evo's deployed row alone, at compile-ahead lag 1, on Kernel Tuner
caches, with surrogate options over the shipped ones; prints ERT to within 2% and the failed proposals.

    python tools/evo_row.py --seeds 4 --options '{"fail_model": true}' DIR/pnpoly_RTX_Titan.json.gz ...

No peers and no selection: it compares options of evo's own proposer (tools/bench_deployed.py is the benchmark).
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

FIRST = 60  # failed proposals are counted among the first this many


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("caches", nargs="+")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--cap", type=int, default=150)
    ap.add_argument("--options", default=None, help="surrogate options (JSON) over the deployed config's")
    ap.add_argument("--out", default=None, help="a JSON file for the per-landscape numbers")
    args = ap.parse_args(argv)
    opts = json.loads(args.options) if args.options else None
    evo = next(s for s in sb.STRATEGIES if s.label == sb.EVO)
    res = {}
    for path in args.caches:
        t0 = time.perf_counter()
        space = sb.load_space(path, None)
        rs, _ = sb.bench(space, args.seeds, [evo], cap=args.cap, lag=1, out=lambda s: None, evo_options=opts)
        runs = rs[sb.EVO]
        outs = [sm.outcome(r.evals_to(0.02), len(r.keys) - r.pre_gpu, args.cap) for r in runs]
        label = Path(path).name.split(".")[0]
        res[label] = {
            "ert2": sm.ert(outs),
            "to2": [r.evals_to(0.02) for r in runs],
            "failed_first": [sum(space.scores.get(k) is None for k in r.keys[:FIRST]) for r in runs],
            "seconds": time.perf_counter() - t0,
        }
        r = res[label]
        print(f"{label}: ERT2% {r['ert2']:.1f} to={r['to2']} failed/{FIRST}={r['failed_first']}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
