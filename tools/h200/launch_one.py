"""Launch one genome's kernel a few times at one geometry (a target for ncu; no timing of its own).

    ncu --clock-control none -k regex:fp4 -c 1 python3 tools/h200/launch_one.py configs/fp4_matvec.yaml \
        '{"expand": "f16"}' in7168_out18432 [reps] [KERNEL.cu]

KERNEL.cu: build from another kernel.cu (a variant) instead of the family's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo.config import load_config  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.gpu import GpuBackend  # noqa: E402


def main() -> int:
    cfg = load_config(sys.argv[1])
    genome = cfg.family.baseline().replace(**json.loads(sys.argv[2]))
    geo = next(g for g in cfg.geometries if g.name == sys.argv[3])
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    source = Path(sys.argv[5]).read_text() if len(sys.argv) > 5 else None
    builder = Builder(cfg.family, cfg.geometries, cfg.arch)
    be = GpuBackend(cfg.family, cfg.geometries, builder)
    loaded = be.load(builder.build(genome, base_source=source), genome)
    launch = be._launcher(loaded, geo, be.inputs(geo, 0), be._outputs(geo))
    for _ in range(reps):
        launch()
    be._sync()
    print(f"launched {reps}x {dict(genome)} at {geo.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
