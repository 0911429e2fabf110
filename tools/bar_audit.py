"""Is issue 42's bar attainable? Every peer of the held-out runs put in evo's place (session 31).

The bar: ERT2% of the candidate <= 0.5x the best peer's (geometric mean over the landscapes) and **no landscape
worse than 1.25x**, the best peer chosen per landscape on the selection seeds and compared on disjoint test seeds.
This tool asks whether any strategy of the field meets it against the best of the *others*:

    # 1. the test runs the committed held-out runs lack (every peer on the test seeds; one process)
    python tools/bar_audit.py run --from benchmarks/results/2026-12-07-search-heldout/runs.json.gz \\
        --from benchmarks/results/2026-12-07-search-heldout-2/runs.json.gz --seeds 5 --first-seed 0 \\
        --out benchmarks/results/2026-12-07-bar-audit/runs
    # 2. the audit: per candidate, leave-one-out selection, ratio per landscape, geometric mean, counts
    python tools/bar_audit.py audit --from ...heldout/runs.json.gz --from ...heldout-2/runs.json.gz \\
        --from benchmarks/results/2026-12-07-bar-audit/runs --seeds 10

``run`` reuses the committed runs.json.gz (tools/bench_deployed.py ``--out``): their landscapes (the cache paths
they name), their peers (the rows of their "selection" part: 13 peers on seeds 1000..1002) and the test runs they
hold (evo's row and the chosen peer on seeds 0..19); it runs every other peer on the test seeds with
tools/search_bench.py's ``bench`` and the same budget as bench_deployed (cap evaluations; Kernel Tuner's
``max_fevals`` = cap), and writes one ``LABEL-sFIRST-LAST.json.gz`` per landscape and seed block, in
runs.json.gz's layout (only a "test" part). The arithmetic of ``audit`` is in tools/bar_audit_score.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import bar_audit_score as bs  # noqa: E402

FORBIDDEN = ("sel3", "ktcaches-3")  # the frozen third list must stay unseen: never open a path naming it


class AuditError(ValueError):
    """A run or audit that cannot go on (one line: what is wrong)."""


def guard(path: str | Path) -> None:
    """Refuse any path of the frozen third list (called before a landscape is opened)."""
    if any(f in str(path) for f in FORBIDDEN):
        raise AuditError(f"{path}: the third held-out list stays unseen (never opened by this tool)")


def run_missing(doc: dict[str, Any], args: argparse.Namespace) -> None:
    """For every landscape of ``doc`` (merged committed runs), every selection peer not already run on the test
    seeds: run it there (one process) and write the block's file."""
    from tools import bench_deployed as bd
    from tools import search_bench as sb

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    by_label = {s.label: s for s in sb.STRATEGIES}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for label, d in doc.items():
        dest = out / f"{label}-s{seeds[0]}-{seeds[-1]}.json.gz"
        if dest.exists():
            print(f"== {label}: {dest.name} exists, skipped", flush=True)
            continue
        guard(d["sweep"])
        have = {k for k, rs in d["runs"]["test"].items() if set(seeds) <= {r["seed"] for r in rs} and not args.all}
        todo = [by_label[k] for k in d["runs"]["selection"] if k not in have]
        t0 = time.perf_counter()
        space = sb.load_space(d["sweep"])
        print(f"== {label}: {space.size} genomes; running {len(todo)} peers on seeds {seeds[0]}..{seeds[-1]}")
        strategies = [bd.with_budget(s, args.cap) for s in todo]
        got, skipped = sb.bench(
            space, len(seeds), strategies, first_seed=seeds[0], cap=args.cap, jobs=1, out=lambda s: print("    " + s)
        )
        if skipped:
            raise AuditError(f"{label}: skipped {skipped}")
        test = {k: [bs.asdict(bd.record(space, r)) for r in rs] for k, rs in got.items()}
        block = {label: {"sweep": d["sweep"], "best": space.best, "runs": {"test": test}}}
        with gzip.open(dest, "wt") as f:
            json.dump(block, f)
        print(f"  wrote {dest} ({time.perf_counter() - t0:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("run", "audit"))
    ap.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        help="a runs.json.gz (or a folder of them) written by tools/bench_deployed.py or by `run`; repeatable",
    )
    ap.add_argument("--seeds", type=int, default=10, help="test seeds (first-seed ..)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=150, help="evaluations every run may use (the committed runs': 150)")
    ap.add_argument("--landscapes", default=None, help="comma-separated labels (default: every one)")
    ap.add_argument("--out", default=None, help="run: the folder for the blocks; audit: a folder for the tables")
    ap.add_argument(
        "--all",
        action="store_true",
        help="run: every peer, those the files already hold too (a reproduction check: `audit` refuses a seed "
        "that ran twice with different evaluations)",
    )
    ap.add_argument("--evo-row", default="evo lag 1", help="the committed test row of evo shown as one more line")
    args = ap.parse_args(argv)
    try:
        for s in args.sources:
            guard(s)
        doc = bs.merge([bs.load(p) for p in bs.expand(args.sources)])
        if args.landscapes:
            doc = {k: doc[k] for k in args.landscapes.split(",")}
        if args.what == "run":
            if not args.out:
                ap.error("run: --out DIR")
            run_missing(doc, args)
            return 0
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))
        rows = bs.audit(doc, seeds, args.cap, args.evo_row)
        text = bs.report(rows, doc, seeds, args.cap, args.evo_row)
    except (AuditError, bs.ScoreError) as e:
        print(f"bar_audit: {e}", file=sys.stderr)
        return 2
    print("\n".join(text))
    if args.out:
        bs.write(Path(args.out), rows, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
