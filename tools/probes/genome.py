"""Probe: judge and time a few genomes side by side with a reference genome.

    python3 tools/probes/genome.py CONFIG GENOMES.json [--rounds N] [--backend gpu|recorded]

GENOMES.json: {"ref": {knob changes against the baseline}, "genomes": [{...}, ...]}, optionally "ref_source": a
kernel.cu to build the reference from (e.g. `git show HEAD:candidates/<family>/kernel.cu`), to time a genome
before and after a source change side by side; a genome's own "source" key builds it from another kernel.cu (a
timing variant). For each genome: build (ptxas registers / spills), the correctness checks of the campaign's
backend (seeds x runs, poisoned outputs) judged by the campaign's correctness gates (gates.judge, the config's
mode and tolerance factor),
then interleaved timing against the reference (the harness's CUDA-graph batches, `rounds` pairs) at every
geometry of the config. One line per (genome, geometry): medians, the ratio with its quartiles, % of the measured
copy ceiling. A genome with "timing_only": true is timed even where the gate rejects it (a variant that drops work
on purpose, e.g. the arithmetic or the copies). "batch_ms" sets the CUDA-graph batches' length (10 ms unless
given). `--backend recorded` answers from the family's recorded sweep (no GPU; "source" variants need a GPU).
A probe, not a campaign: nothing is recorded in a ledger; write its output under benchmarks/scratch/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from evo.config import load_config  # noqa: E402
from evo.search import Proposal  # noqa: E402
from gates.judge import OUTPUTS, JudgeContext, judge  # noqa: E402
from harness.build import Builder  # noqa: E402


def backend_for(cfg, builder: Builder, kind: str, batch_ms: float):
    if kind == "recorded":
        from harness.recorded import RecordedBackend

        c = cfg.gates.correctness
        return RecordedBackend(cfg.family, cfg.geometries, seeds=c.seeds, runs=c.runs)
    from harness.gpu import GpuBackend

    cg = cfg.gates.correctness
    return GpuBackend(cfg.family, cfg.geometries, builder, seeds=cg.seeds, runs=cg.runs, batch_ms=batch_ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/probes/genome.py", description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("genomes", help="GENOMES.json (see the module docstring)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--backend", choices=("gpu", "recorded"), default="gpu")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    spec = json.loads(Path(args.genomes).read_text())
    rounds = args.rounds
    fam, geos = cfg.family, cfg.geometries
    builder = Builder.for_config(cfg)
    be = backend_for(cfg, builder, args.backend, float(spec.get("batch_ms", 10.0)))
    base = fam.baseline()
    be.correctness(be.load(builder.build(base), base), freeze=True)
    ctx = JudgeContext.standalone(cfg, be, builder)
    ceiling = be.copy_ceiling()
    print(f"copy ceiling {ceiling}", flush=True)
    ref_g = base.replace(**spec["ref"])
    ref_src = Path(spec["ref_source"]).read_text() if spec.get("ref_source") else None
    ref = be.load(builder.build(ref_g, base_source=ref_src), ref_g)
    launches = {geo.name: be.launches_for(ref, geo) for geo in geos}
    for ch in spec["genomes"]:
        ch = dict(ch)
        src_path = ch.pop("source", None)  # a genome built from another kernel.cu (a timing variant)
        timing_only = ch.pop("timing_only", False)  # a variant that drops work on purpose: timed though rejected
        tag = json.dumps(ch, sort_keys=True) + (f" [{Path(src_path).parent.name}]" if src_path else "")
        try:
            g = fam.genome(ch)
        except ValueError as e:  # an unknown knob or a value out of range
            print(f"{tag}: invalid: {e}", flush=True)
            continue
        err = fam.check(g, geos)
        if err:
            print(f"{tag}: invalid: {err}", flush=True)
            continue
        try:
            built = builder.build(g, base_source=Path(src_path).read_text() if src_path else None)
            v = be.load(built, g)
        except Exception as e:  # noqa: BLE001 - a probe: report and go on
            print(f"{tag}: build failed: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        res = {k.split(",")[0]: (m.resources.registers, m.resources.spills) for k, m in built.modules.items()}
        try:  # the campaign's correctness gates (the judge's: the exact-mode rule and the correctness gate)
            verdict, judged = judge(Proposal(g, "probe"), ctx, only=OUTPUTS, built=built, loaded=v)
        except Exception as e:  # noqa: BLE001
            print(f"{tag}: crashed: {str(e).splitlines()[0][:200]}", flush=True)
            return 1  # the context is gone
        checks = judged.outputs.checks if judged.outputs is not None else []  # (none: rejected by the exact rule)
        ratio = {
            c.geometry: round(c.rel_err / be.baseline_errors[f"{c.geometry}/{c.seed}/{c.output}"], 2)
            for c in checks
            if c.rel_err is not None
        }
        print(
            f"{tag}: regs/spills {res}; correctness {'ok' if verdict.ok else 'REJECTED'} ({verdict.reason}); "
            f"error / baseline's {ratio}",
            flush=True,
        )
        if not verdict.ok and not timing_only:
            continue
        for geo in geos:
            s = be.measure([("v", v), ("ref", ref)], geo, rounds, launches[geo.name])
            tv, tr = statistics.median(s.times_us["v"]), statistics.median(s.times_us["ref"])
            ratios = sorted(r / x for r, x in zip(s.times_us["ref"], s.times_us["v"]))
            pct = fam.bytes_moved(geo) / (tv * 1e-6) / (ceiling["ceiling_tbps"] * 1e12) * 100
            print(
                f"  {geo.name:22s} ref {tr:8.2f} us  genome {tv:8.2f} us  ref/genome {tr / tv:.3f}x "
                f"(quartiles {ratios[len(ratios) // 4]:.3f}..{ratios[3 * len(ratios) // 4]:.3f})  "
                f"{pct:.1f}% of ceiling  discarded {s.discarded}" + ("  (timing variant)" if timing_only else ""),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
