"""Probe: a genome's time and the copy ceiling, measured alternately in one process (on the GPU).

    python3 tools/h200/ceiling_probe.py configs/fp4_matvec.yaml SPEC.json [trials]

SPEC.json: {"genome": {knob changes against the baseline}, "geometry": NAME, optionally "source": a kernel.cu and
"batch_ms" (10 unless given, as tools/h200/genome_probe.py) and "launch": "pdl" (built with EVO_PDL=1, launched with
programmatic dependent launch where the family allows it, as gates.perf.launch: pdl).
Each trial measures the copy ceiling as a campaign does (harness GpuBackend.copy_ceiling) and as it did before
session 11 (one trial of 1 GiB), in turns first, then the genome (5 CUDA-graph batches, throttled ones dropped).
One line a trial, then the spread: how far "% of the measured copy ceiling" moves with the ceiling alone when the
kernel stays put. A probe: nothing is recorded in a ledger.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo.config import load_config  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.gpu import GpuBackend  # noqa: E402


def main() -> int:
    cfg = load_config(sys.argv[1])
    spec = json.loads(Path(sys.argv[2]).read_text())
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    fam = cfg.family
    geo = next(g for g in cfg.geometries if g.name == spec["geometry"])
    pdl = spec.get("launch", "plain") == "pdl"
    builder = Builder(fam, [geo], cfg.arch, defines={"EVO_PDL": 1} if pdl else None)
    be = GpuBackend(fam, [geo], builder, seeds=1, runs=1, batch_ms=float(spec.get("batch_ms", 10.0)), pdl=pdl)
    g = fam.baseline().replace(**spec["genome"])
    src = Path(spec["source"]).read_text() if spec.get("source") else None
    v = be.load(builder.build(g, base_source=src), g)
    n = be.launches_for(v, geo)
    bytes_ = fam.bytes_moved(geo)
    print(f"{json.dumps(spec['genome'], sort_keys=True)} at {geo.name}: {bytes_} bytes, {n} launches a batch, "
          f"launches {'PDL' if pdl and fam.pdl_safe(g) else 'plain'}",
          flush=True)
    rows = []
    for i in range(trials):
        # the campaign's ceiling (harness default) and one 1 GiB copy as before session 11, in turns first
        if i % 2:
            new = be.copy_ceiling()
            old = be.copy_ceiling(gib=1.0, trials=1)
        else:
            old = be.copy_ceiling(gib=1.0, trials=1)
            new = be.copy_ceiling()
        s = be.measure([("v", v)], geo, 5, n)
        t = statistics.median(s.times_us["v"])
        tbps = bytes_ / (t * 1e-6) / 1e12
        rows.append((old["ceiling_tbps"], new["ceiling_tbps"], t))
        per = ", ".join(f"{r['own_kernel_tbps']:.3f}/{r['copyto_tbps']:.3f}" for r in new["trials"])
        print(f"trial {i}: ceiling {new['ceiling_tbps']:.3f} TB/s ({new['method']}; own/copyto {per}); 1 GiB once "
              f"{old['ceiling_tbps']:.3f} (own {old['own_kernel_tbps']:.3f}, copyto {old['copyto_tbps']:.3f})  kernel "
              f"{t:.2f} us = {tbps:.3f} TB/s = {100 * tbps / new['ceiling_tbps']:.1f}% of the ceiling, "
              f"{100 * tbps / old['ceiling_tbps']:.1f}% of 1 GiB once  discarded {s.discarded}", flush=True)
    ts = [r[2] for r in rows]
    tb = bytes_ / (statistics.median(ts) * 1e-6) / 1e12
    print(f"kernel: median {statistics.median(ts):.2f} us (min {min(ts):.2f}, max {max(ts):.2f}) = {tb:.3f} TB/s",
          flush=True)
    for k, name in ((1, "ceiling (harness)"), (0, "1 GiB once")):
        c = [r[k] for r in rows]
        print(f"{name}: min {min(c):.3f}, median {statistics.median(c):.3f}, max {max(c):.3f} TB/s -> the kernel's "
              f"median is {100 * tb / max(c):.1f}% / {100 * tb / statistics.median(c):.1f}% / {100 * tb / min(c):.1f}% "
              f"of them (max / median / min)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
