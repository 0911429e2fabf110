"""Probe: does the campaign's batch size move its figures? (on the GPU; nothing is recorded in a ledger)

    python3 tools/h200/batch_probe.py configs/fp4_matvec_pdl.yaml [rounds]

A campaign times candidate, champion and baseline interleaved in CUDA graphs of one launch count per geometry, sized
by the baseline (55 launches at fp4_matvec's anchor: 10 ms of the baseline, about 1.1 ms of the tma genomes), and its
champions there read 20.45-20.86 µs where probes of the same kernel in graphs of about 10 ms read 20.26-20.32 µs
(sessions 16-17). Three ways of timing session 17's champion (#75, the 16-row 8-warp tma genome) beside call d's
previous one (#74, 32 rows x 4 warps, unroll 2) at the anchor: (a) as the campaign does, with the baseline and 55
launches; (b) the same three parts in graphs sized by the candidate (about 10 ms of it); (c) the two without the
baseline, graphs sized by the candidate. Launches as the config says (PDL where the family allows).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ceiling_check_probe import anchor_backend  # noqa: E402

CAND = {"expand": "mma", "qload": "tma", "row_groups": 1, "rows_per_block": 16, "unroll": 1, "warps": 8}
CHAMP = {"expand": "mma", "qload": "tma", "row_groups": 1, "rows_per_block": 32, "unroll": 2, "warps": 4}


def main() -> int:
    cfg, geo, builder, be = anchor_backend(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    fam = cfg.family
    base = fam.baseline()
    loaded = {name: be.load(builder.build(g), g)
              for name, g in (("cand", base.replace(**CAND)), ("champ", base.replace(**CHAMP)), ("base", base))}
    n_base, n_cand = be.launches_for(loaded["base"], geo), be.launches_for(loaded["cand"], geo)
    three = ("cand", "champ", "base")
    for label, names, n in (("(a) as a campaign: cand/champ/base, graphs sized by the baseline", three, n_base),
                            ("(b) cand/champ/base, graphs sized by the candidate", three, n_cand),
                            ("(c) cand/champ, graphs sized by the candidate", ("cand", "champ"), n_cand),
                            ("(a) again", three, n_base)):
        s = be.measure([(k, loaded[k]) for k in names], geo, rounds, n)
        med = {k: statistics.median(v) if v else None for k, v in s.times_us.items()}
        ratio = statistics.median(c / x for c, x in zip(s.times_us["champ"], s.times_us["cand"]))
        print(f"{label}: {n} launches a graph, {len(s.times_us['cand'])} rounds (discarded {s.discarded}), SM "
              f"{s.clocks.get('sm_mhz_min')}-{s.clocks.get('sm_mhz_max')} MHz: "
              + ", ".join(f"{k} {v:.2f} us" for k, v in med.items() if v)
              + f"; champ/cand per round {ratio:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
