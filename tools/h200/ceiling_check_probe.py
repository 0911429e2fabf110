"""Probe: evo/ceiling.py's alternations (one copy-ceiling trial, then the champion, the order swapped every other
time) for one genome at the anchor, with the champion's batches sized by the baseline's launch count (as session 17's
call d ran the check) and by its own (as the check does since). On the GPU; nothing is recorded in a ledger.

    python3 tools/h200/ceiling_check_probe.py configs/fp4_matvec_pdl.yaml '{"expand": "mma", ...}' [alternations]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo import ceiling  # noqa: E402
from evo.config import load_config  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.device import Nvml  # noqa: E402
from harness.gpu import GpuBackend  # noqa: E402


def anchor_backend(path: str):
    """(config, its first weighted geometry, a builder with the config's defines, a GPU backend timing as the
    config says: batch_ms, PDL launches, NVML clocks where present) for a probe of one geometry."""
    cfg = load_config(path)
    geo = next(g for g in cfg.geometries if g.weight > 0)
    builder = Builder(cfg.family, [geo], cfg.arch, defines=cfg.build_defines)
    nvml = Nvml()
    p = cfg.gates.perf
    be = GpuBackend(cfg.family, [geo], builder, seeds=1, runs=1, batch_ms=p.batch_ms, pdl=p.launch == "pdl",
                    nvml=nvml if nvml.available() else None)
    return cfg, geo, builder, be


def main() -> int:
    cfg, geo, builder, be = anchor_backend(sys.argv[1])
    times = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    fam, p = cfg.family, cfg.gates.perf
    g = fam.baseline().replace(**json.loads(sys.argv[2]))
    v = be.load(builder.build(g), g)
    base = fam.baseline()
    n_base = be.launches_for(be.load(builder.build(base), base), geo)
    n_own = be.launches_for(v, geo)
    for label, n in (("the baseline's launch count", n_base), ("its own launch count", n_own),
                     ("the baseline's launch count, again", n_base)):
        trials = ceiling.run_check(be, v, [geo], {geo.name: n}, p.rounds, times)
        print(f"== batches of {n} launches ({label}), {p.rounds} rounds an alternation", flush=True)
        for t in trials:
            us = t["us"][geo.name]
            pct = ceiling.pct(fam.bytes_moved(geo), us, t["ceiling_tbps"])
            print(f"  {t['first']:8s} first: ceiling {t['ceiling_tbps']:.3f} TB/s, champion "
                  f"{us if us is None else round(us, 2)} us = {pct if pct is None else round(pct, 1)}%, discarded "
                  f"{t['discarded'][geo.name]}", flush=True)
        for line in ceiling.describe({"geometries": ceiling.summarize(trials, {geo.name: fam.bytes_moved(geo)})}):
            print("  " + line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
