"""Probe: do L2 prefetches or the L2::256B load hint raise fp4_matvec's bandwidth? (not a knob yet)

    python3 tools/h200/fp4_probe.py configs/fp4_matvec.yaml [rounds]

For a few words_funnel genomes, the kernel text is edited here (kernel.cu is untouched) into variants:
  pfN   at the top of each step, every lane issues ``prefetch.global.L2`` for its blocks N steps ahead
  l2h   the five word loads of a block carry ``ld.global.nc.L2::256B`` (a 256-byte L2 fill per miss)
Each variant is checked against the baseline's output hashes (the math is unchanged, so they must be equal)
and timed interleaved with its unedited genome (the harness's CUDA-graph batches, ``rounds`` pairs) at every
geometry of the config. Prints one line per (genome, variant, geometry): medians and the ratio.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo.config import load_config  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.gpu import GpuBackend  # noqa: E402

GENOMES = [
    {"expand": "f16", "qload": "words_funnel", "row_groups": 2, "rows_per_block": 8, "warps": 2, "unroll": 1},
    {"expand": "f16", "qload": "words_funnel", "row_groups": 1, "rows_per_block": 8, "warps": 4, "unroll": 1},
    {"expand": "f16", "qload": "words_funnel", "row_groups": 2, "rows_per_block": 8, "warps": 2, "unroll": 2},
    {"expand": "f16", "qload": "words_funnel", "row_groups": 2, "rows_per_block": 16, "warps": 4, "unroll": 1},
]

LOOP = "  for (int s0 = 0; s0 < NSTEP; s0 += U) {\n    // Every quant load"
WORDS = "  for (int k = 0; k < 5; ++k) w[k] = p[k];"


def prefetch_variant(src: str, dist: int) -> str:
    assert src.count(LOOP) == 1, "the probe's anchor in kernel.cu moved"
    pf = (f"  for (int s0 = 0; s0 < NSTEP; s0 += U) {{\n"
          f"#pragma unroll\n    for (int c = 0; c < NCH; ++c) {{\n"
          f"      const int bp = VL * (s0 + {dist} * U) + 32 * (g * NCH + c) + lane;\n"
          f"      if (bp < NBLK) {{\n#pragma unroll\n        for (int r = 0; r < RW; ++r)\n"
          f"          asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(rows[r] + 17 * bp));\n      }}\n    }}\n"
          f"    // Every quant load")
    return src.replace(LOOP, pf)


def hint_variant(src: str) -> str:
    assert src.count(WORDS) == 1, "the probe's anchor in kernel.cu moved"
    hinted = ("#if EVO_QLOAD == EVO_QLOAD_WORDS_FUNNEL\n"
              "  for (int k = 0; k < 5; ++k)\n"
              "    asm volatile(\"ld.global.nc.L2::256B.u32 %0, [%1];\" : \"=r\"(w[k]) : \"l\"(p + k));\n"
              "#else\n" + WORDS + "\n#endif")
    return src.replace(WORDS, hinted)


def main() -> int:
    cfg = load_config(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    fam, geos = cfg.family, cfg.geometries
    builder = Builder(fam, geos, cfg.arch)
    be = GpuBackend(fam, geos, builder, seeds=2, runs=1, batch_ms=10.0)
    base = fam.baseline()
    base_loaded = be.load(builder.build(base), base)
    be.correctness(base_loaded, freeze=True)
    src = fam.source()
    variants = {"pf1": prefetch_variant(src, 1), "pf2": prefetch_variant(src, 2), "pf4": prefetch_variant(src, 4),
                "l2h": hint_variant(src), "pf2+l2h": prefetch_variant(hint_variant(src), 2)}
    print(f"copy ceiling {be.copy_ceiling()}", flush=True)
    for ch in GENOMES:
        g = base.replace(**ch)
        ref = be.load(builder.build(g), g)
        launches = {geo.name: be.launches_for(ref, geo) for geo in geos}
        for name, body in variants.items():
            try:
                v = be.load(builder.build(g, base_source=body), g)
            except Exception as e:  # noqa: BLE001 - a probe: report and go on
                print(f"{json.dumps(ch)} {name}: build failed: {str(e).splitlines()[0][:200]}", flush=True)
                continue
            ev = be.correctness(v, freeze=False)
            same = all(h == be.baseline_hashes.get(f"{c.geometry}/{c.seed}/{c.output}") for c in ev.checks
                       for h in c.hashes)
            for geo in geos:
                s = be.measure([("v", v), ("ref", ref)], geo, rounds, launches[geo.name])
                tv, tr = statistics.median(s.times_us["v"]), statistics.median(s.times_us["ref"])
                ratios = sorted(r / x for r, x in zip(s.times_us["ref"], s.times_us["v"]))
                print(f"{json.dumps(ch)} {name:8s} {geo.name:22s} ref {tr:8.2f} us  variant {tv:8.2f} us  "
                      f"speedup {tr / tv:.3f}x (pairs {ratios[len(ratios) // 4]:.3f}..{ratios[3 * len(ratios) // 4]:.3f})"
                      f"  bit-identical {same}  discarded {s.discarded}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
