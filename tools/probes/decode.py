"""Probe: the decode knobs of mhc_pre_decode, judged and timed at every geometry of a config, with the latency floor.

    python3 tools/probes/decode.py [CONFIG] [--genomes GENOMES.json] [--rounds N] [--batch-ms MS] [--out DIR]

CONFIG: configs/mhc_pre_decode.yaml unless given. GENOMES.json: {"name": {knob changes against the baseline}, ...}
(default: :data:`GENOMES`, each decode knob alone on a tuned genome of the old knobs, and their combinations).

For each genome: build (registers, spills), the correctness checks of the GPU backend (the config's seeds x runs,
poisoned outputs, float64 reference) judged by the config's correctness gate with the family's inexact knobs, and
whether each output kept the baseline's bits. Then, per geometry, every passing genome, the baseline and an empty
kernel of the same signature launched as the baseline is (its grid and block; plainly, and with PDL) are timed
interleaved in one series of rounds (the harness's CUDA-graph batches, each part's graph about batch_ms long).
The empty kernel's time is the latency floor: a decode time reads as a multiple of it. Every module is built with
EVO_PDL=1, so genomes with pdl_overlap launch with PDL, the others plainly (what `gates.perf.launch: pdl` does).

Writes DIR/decode-probe.json (every figure) and prints a table. A probe, not a campaign: nothing goes to a ledger.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "mhc_pre_decode.yaml"

# The kernel's signature with nothing in it: under EVO_PDL it takes part in the PDL chain as a real kernel would.
EMPTY_SOURCE = """\
#ifndef EVO_PDL
#define EVO_PDL 0
#endif
extern "C" __global__ void mhc_pre_big_fuse(const float* dot_mix, const float* sqrsum, const unsigned short* residual,
                                            const float* scale, const float* base, float* post_mix, float* comb_mix,
                                            unsigned short* layer_input, int T, int H) {
#if EVO_PDL
  asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\\n" ::: "memory");
#endif
}
"""

_TUNED = {"meta": "slice", "barrier": "early", "split_reduce": "warp", "block": 128, "h_split": 4}
_SERIAL = {**_TUNED, "split_reduce": "serial"}
_EXACT = {**_SERIAL, "split_lanes": True, "sinkhorn": "full", "early_loads": True, "pre_per_warp": True}
GENOMES: dict[str, dict[str, Any]] = {
    "tuned": _TUNED,
    "tuned_serial": _SERIAL,
    "+split_lanes": {**_SERIAL, "split_lanes": True},
    "+lane16": {**_TUNED, "sinkhorn": "lane16"},
    "+full": {**_TUNED, "sinkhorn": "full"},
    "+fast_math": {**_TUNED, "fast_math": True},
    "+early_loads": {**_TUNED, "early_loads": True},
    "+pre_per_warp": {**_TUNED, "pre_per_warp": True},
    "+pdl": {**_TUNED, "pdl_overlap": True},
    "+h_split8": {**_TUNED, "h_split": 8},
    "+h_split16": {**_TUNED, "h_split": 16},
    "+block64": {**_TUNED, "block": 64},
    "exact_all": _EXACT,
    "exact_all+pdl": {**_EXACT, "pdl_overlap": True},
    "exact_all+pdl+h8": {**_EXACT, "pdl_overlap": True, "h_split": 8},
    "fast_all+pdl": {**_EXACT, "pdl_overlap": True, "fast_math": True},
    "fast_all+pdl+lane16": {**_EXACT, "pdl_overlap": True, "fast_math": True, "sinkhorn": "lane16"},
    "fast_all+pdl+h8": {**_EXACT, "pdl_overlap": True, "fast_math": True, "h_split": 8},
    "fast_all+pdl+h2": {**_EXACT, "pdl_overlap": True, "fast_math": True, "h_split": 2},
    "fast_all+pdl+w0": {**_EXACT, "pdl_overlap": True, "fast_math": True, "warp0_stream": True},
}


def bits_kept(checks: list[Any], baseline_hashes: Mapping[str, str]) -> dict[str, bool]:
    """geometry -> whether every output at every seed and run hashed as the baseline's."""
    out: dict[str, bool] = {}
    for c in checks:
        same = all(h == baseline_hashes.get(f"{c.geometry}/{c.seed}/{c.output}") for h in c.hashes)
        out[c.geometry] = out.get(c.geometry, True) and same
    return out


def error_ratios(checks: list[Any], baseline_errors: Mapping[str, float]) -> dict[str, float]:
    """output -> the largest error against float64 over geometries and seeds, as a multiple of the baseline's."""
    out: dict[str, float] = {}
    for c in checks:
        base = baseline_errors.get(f"{c.geometry}/{c.seed}/{c.output}")
        if c.rel_err is None or not base:
            continue
        out[c.output] = max(out.get(c.output, 0.0), c.rel_err / base)
    return out


def summary_table(result: Mapping[str, Any]) -> str:
    """Markdown: per geometry, the floor and each genome's median µs, its speedup over the baseline and its
    multiple of the floor launched the same way (PDL genomes against the PDL floor)."""
    names = [n for n, g in result["genomes"].items() if g.get("timed")]
    head = "| geometry | floor plain / pdl µs | baseline µs | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for geo, t in result["timings"].items():
        fp, fq, b = t["floor_plain"], t["floor_pdl"], t["baseline"]
        cells = []
        for n in names:
            us = t.get(n)
            if us is None:
                cells.append("-")
                continue
            floor = fq if result["genomes"][n]["pdl"] else fp
            cells.append(f"{us:.2f} ({b / us:.2f}x, {us / floor:.1f}F)")
        lines.append(f"| {geo} | {fp:.2f} / {fq:.2f} | {b:.2f} ({b / fp:.1f}F) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/probes/decode.py", description=__doc__.split("\n")[0])
    ap.add_argument("config", nargs="?", default=str(CONFIG))
    ap.add_argument("--genomes", help="GENOMES.json: name -> knob changes (default: the module's GENOMES)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch-ms", type=float, default=5.0)
    ap.add_argument("--out", default="benchmarks/scratch/decode-probe")
    args = ap.parse_args(argv)

    from evo.config import load_config
    from evo.search import Proposal
    from gates.judge import OUTPUTS, JudgeContext, judge
    from harness.build import Builder
    from harness.gpu import GpuBackend

    cfg = load_config(args.config)
    fam, geos, cg = cfg.family, cfg.geometries, cfg.gates.correctness
    spec = json.loads(Path(args.genomes).read_text()) if args.genomes else GENOMES
    builder = Builder(fam, geos, cfg.arch, defines={"EVO_PDL": 1})
    be = GpuBackend(fam, geos, builder, seeds=cg.seeds, runs=cg.runs, batch_ms=args.batch_ms, pdl=True)
    base = fam.baseline()
    base_loaded = be.load(builder.build(base), base)
    be.correctness(base_loaded, freeze=True)
    ctx = JudgeContext.standalone(cfg, be, builder)
    result: dict[str, Any] = {"config": str(args.config), "facts": be.facts(), "genomes": {}, "timings": {}}
    empty = builder.build(base, base_source=EMPTY_SOURCE)
    parts = [
        ("baseline", base_loaded),
        ("floor_plain", be.load(empty, base)),
        ("floor_pdl", be.load(empty, base.replace(pdl_overlap=True))),  # pdl_safe: launched with PDL
    ]
    for name, ch in spec.items():
        rec: dict[str, Any] = {"changes": ch}
        result["genomes"][name] = rec
        g = fam.genome(ch)
        why = fam.check(g, geos)
        if why:
            rec["invalid"] = why
            print(f"{name}: invalid: {why}", flush=True)
            continue
        built = builder.build(g)
        rec["resources"] = {k: [m.resources.registers, m.resources.spills] for k, m in built.modules.items()}
        loaded = be.load(built, g)
        # the outputs checked here, then judged by the campaign's correctness gates (the judge's)
        ev = be.correctness(loaded)
        v, _ = judge(Proposal(g, "decode probe"), ctx, only=OUTPUTS, built=built, loaded=loaded, outputs=ev)
        rec.update(
            ok=v.ok,
            reason=v.reason,
            bits_kept=bits_kept(ev.checks, be.baseline_hashes),
            error_vs_baseline=error_ratios(ev.checks, be.baseline_errors),
            pdl=fam.pdl_safe(g),
            timed=v.ok,
        )
        print(
            f"{name}: {'ok' if v.ok else 'REJECTED'} ({v.reason}); bits kept at "
            f"{sum(rec['bits_kept'].values())}/{len(geos)} geometries; error / baseline's "
            f"{ {k: round(x, 2) for k, x in rec['error_vs_baseline'].items()} }; regs/spills {rec['resources']}",
            flush=True,
        )
        if v.ok:
            parts.append((name, loaded))
    for geo in geos:
        counts = {lb: be.launches_for(ld, geo) for lb, ld in parts}
        s = be.measure(parts, geo, args.rounds, counts)
        t = {lb: statistics.median(x) for lb, x in s.times_us.items() if x}
        t["discarded"] = s.discarded
        result["timings"][geo.name] = t
        print(
            f"{geo.name}: floor {t['floor_plain']:.2f} / pdl {t['floor_pdl']:.2f} us, baseline {t['baseline']:.2f}, "
            + ", ".join(f"{lb} {t[lb]:.2f}" for lb, _ in parts[3:]),
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode-probe.json").write_text(json.dumps(result, indent=1, default=str))
    table = summary_table(result)
    (out / "decode-probe.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
