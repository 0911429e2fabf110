"""How far two recorded sweeps of one family agree: the same landscape measured twice, or on two machines.

    python tools/compare_sweeps.py FAMILY FIRST SECOND [--target 0.02]
    python tools/compare_sweeps.py FAMILY SWEEP --genome GENOME_JSON


Each sweep is read as tools/search_bench.py reads it (the campaign's objective per genome, its correctness mode);
over the genomes valid in both it prints the correlation of log objective, the spread of the log ratio (sd, and
its largest), where each sweep's best genome ranks in the other, and how many genomes are within the target of
each sweep's best. One line per figure, to quote beside a landscape measured again.

With ``--genome`` (a campaign's champion, as `evo status --json` prints it) it says where that genome ranks in one
sweep and how far its objective is from the sweep's best: "within 1% of the best of its space on that card" read
off a sweep of that card.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import search_bench as sb  # noqa: E402


def compare(a: sb.Space, b: sb.Space, target: float = sb.HEADLINE) -> dict[str, float | int | str]:
    keys = [k for k, v in a.scores.items() if v is not None and b.scores.get(k) is not None]
    if len(keys) < 2:
        raise SystemExit(f"the two sweeps share {len(keys)} valid genome(s): nothing to compare")
    x = np.log([a.scores[k] / a.best for k in keys])  # type: ignore[operator]
    y = np.log([b.scores[k] / b.best for k in keys])  # type: ignore[operator]
    rank_a = sorted(keys, key=lambda k: -(a.scores[k] or 0.0))
    rank_b = sorted(keys, key=lambda k: -(b.scores[k] or 0.0))
    d = x - y
    return {
        "genomes": len(keys),
        "corr": float(np.corrcoef(x, y)[0, 1]),
        "sd": float(np.std(d - d.mean())),
        "max": float(np.max(np.abs(d - d.mean()))),
        "first_best_in_second": rank_b.index(rank_a[0]) + 1,
        "second_best_in_first": rank_a.index(rank_b[0]) + 1,
        "hits_first": len(hits_a := {k for k in keys if (a.scores[k] or 0.0) >= a.goal(target)}),
        "hits_second": len(hits_b := {k for k in keys if (b.scores[k] or 0.0) >= b.goal(target)}),
        "hits_shared": len(hits_a & hits_b),
        "same_best": "yes" if rank_a[0] == rank_b[0] else "no",
    }


def standing(space: sb.Space, genome: dict[str, object]) -> dict[str, float | int]:
    """Where ``genome`` ranks among the sweep's valid genomes (1: the best) and its objective over the best's."""
    mine = space.objective(genome)
    if mine is None:
        raise SystemExit(f"{sb.Genome(genome).key} is not a valid genome of {space.sweep_path}")
    valid = sorted((v for v in space.scores.values() if v is not None), reverse=True)
    return {"rank": 1 + sum(v > mine for v in valid), "of": len(valid), "share": mine / space.best}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family")
    ap.add_argument("first")
    ap.add_argument("second", nargs="?", help="the other sweep (not with --genome)")
    ap.add_argument("--genome", default=None, help="a genome as JSON: its rank and distance from the best instead")
    ap.add_argument("--target", type=float, default=sb.HEADLINE, help="within this share of each sweep's best")
    args = ap.parse_args(argv)
    if args.genome is not None:
        space = sb.load_space(args.family, args.first)
        st = standing(space, json.loads(args.genome))
        print(f"{args.family}: {args.genome} in {args.first} ({space.mode} mode)")
        print(
            f"  rank {st['rank']} of {st['of']} valid genomes; objective {100 * float(st['share']):.2f}% of the "
            f"best's ({100 * (1 - float(st['share'])):.2f}% from it)"
        )
        return 0
    if args.second is None:
        ap.error("give a second sweep, or --genome")
    a, b = sb.load_space(args.family, args.first), sb.load_space(args.family, args.second)
    c = compare(a, b, args.target)
    pct = f"{100 * args.target:g}%"
    print(f"{args.family}: {args.first} vs {args.second} ({a.mode} mode)")
    print(f"  genomes valid in both: {c['genomes']}")
    print(f"  correlation of log objective: {c['corr']:.4f}")
    print(
        f"  log ratio, centred: sd {100 * (math.exp(float(c['sd'])) - 1):.2f}%, "
        f"largest {100 * (math.exp(float(c['max'])) - 1):.1f}%"
    )
    print(
        f"  best genome the same: {c['same_best']} (the first's best is #{c['first_best_in_second']} in the second; "
        f"the second's is #{c['second_best_in_first']} in the first)"
    )
    print(
        f"  genomes within {pct} of the best: {c['hits_first']} in the first, {c['hits_second']} in the second, "
        f"{c['hits_shared']} in both"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
