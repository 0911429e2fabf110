"""Benchmark: how long the surrogate proposer takes per proposal on the largest shipped space.

    python benchmarks/proposal_speed.py [--proposals 20] [--measured 150]

mhc_prenorm_gemm's knob product is 7056 genomes (the valid ones at T40_H4096 are counted and printed); the proposer
is given ``--measured`` random valid genomes as measured attempts (scores drawn at random), then asked for
``--proposals`` proposals in a row. Printed: the machine, the median and the range of the per-proposal wall time.
A benchmark, not a test: its output is committed under benchmarks/results/ beside the date and machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from evo.core.family import Geometry, load_family  # noqa: E402
from evo.core.records import BASELINE, Attempt, Verdict  # noqa: E402
from evo.search.surrogate import Surrogate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--proposals", type=int, default=20)
    ap.add_argument("--measured", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    fam = load_family("mhc_prenorm_gemm")
    geos = [Geometry("T40_H4096", {"T": 40, "H": 4096}, 1.0)]
    rng = random.Random(args.seed)
    base = fam.baseline()
    attempts = [Attempt(0, "t", fam.name, dict(base), base.key, "baseline", verdict=Verdict(BASELINE), score=1.0)]
    prop = Surrogate(fam, geos, {}, args.seed)
    t0 = time.perf_counter()
    prop.propose(attempts, {base.key})  # the first call enumerates the space
    first = time.perf_counter() - t0
    valid = [g for g in prop.space() if prop.valid(g, set())]
    for g in rng.sample(valid, args.measured):
        attempts.append(
            Attempt(
                len(attempts),
                "t",
                fam.name,
                dict(g),
                g.key,
                "x",
                verdict=Verdict.rejected("perf", "x"),
                score=rng.uniform(0.5, 2.0),
            )
        )
    seen = {a.genome_key for a in attempts}
    per = []
    for _ in range(args.proposals):
        t = time.perf_counter()
        p = prop.propose(attempts, seen)
        per.append(time.perf_counter() - t)
        assert p is not None and p.genome.key not in seen
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.processor() or platform.platform()}"
    )
    print(
        f"space: {len(valid)} valid genomes; measured attempts given: {args.measured}; first call (enumerates the "
        f"space) {first * 1000:.0f} ms"
    )
    print(
        f"per proposal over {args.proposals}: median {statistics.median(per) * 1000:.1f} ms, "
        f"min {min(per) * 1000:.1f}, max {max(per) * 1000:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
