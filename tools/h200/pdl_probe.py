"""Probe: one genome launched plainly and with programmatic dependent launch (PDL), side by side (on the GPU).

    python3 tools/h200/pdl_probe.py configs/fp4_matvec.yaml SPEC.json [rounds]

SPEC.json: {"genome": {knob changes against the baseline}, "parts": [{"name": ..., "source": a kernel.cu (the
working tree's unless given), "pdl": true|false, optionally "genome": {its own changes on top}, "module": {globals of
the family's module set while the part is built and launched, e.g. fp4_matvec's TMA_SM_BLOCKS: the ring sized for that
many resident blocks a SM}, "blocks_per_sm": the grid capped at that many blocks a SM (persistent kernels: a part may
be built for 2 resident blocks and launched with 1 a SM, leaving room for the next launch's blocks)}, ...]}; the first
part is the reference of the ratios.
A part with "pdl" is launched through cuLaunchKernelEx with programmatic stream serialization
(harness/driver_launch.py), so that in the timed CUDA graph each launch may begin while the one before is ending.
For each part: the campaign's correctness checks (3 seeds x 2 runs, poisoned outputs, each launch after the
poisoning fill), then the chain check: a graph of 8 (x := seed i's x; launch; copy y out) that must give, for every
i, bit for bit what a plain launch of the same build gives on that x (a kernel that read x before its griddepcontrol.wait would see
the x before). Then the parts interleaved at every geometry of the config (the harness's CUDA-graph batches of the
same launches) with the copy ceiling measured in the same process. A probe: nothing is recorded in a ledger.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo.config import load_config  # noqa: E402
from gates.correctness import correctness_gate  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.device import ClockSample, Nvml  # noqa: E402
from harness.gpu import GpuBackend, _dtype  # noqa: E402


def chain_check(be, loaded, plain, geo, steps: int = 8) -> str:
    """A graph of (x := seed i % 2's x; launch; y copied out): every y bit for bit the plain launch's on that x."""
    import torch

    with torch.cuda.stream(be.stream):  # every step on the backend's stream, in order
        return _chain_check(be, loaded, plain, geo, steps)


def _chain_check(be, loaded, plain, geo, steps: int) -> str:
    import torch

    fam = be.family
    inp = dict(be.inputs(geo, 0))
    xs = [be.inputs(geo, s)["x"].clone() for s in (0, 1)]
    inp["x"] = xs[0].clone()
    outs = {o.name: torch.empty(o.shape, dtype=_dtype(o.dtype), device=be.device) for o in fam.outputs(geo)}
    want = []
    for s in (0, 1):  # the plain launch on each x
        inp["x"].copy_(xs[s])
        be._launcher(plain, geo, inp, outs)()
        be._sync()
        want.append(outs["y"].clone())
    got = [torch.empty_like(outs["y"]) for _ in range(steps)]
    launch = be._launcher(loaded, geo, inp, outs)
    launch()
    be._sync()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=be.stream):
        for i in range(steps):
            inp["x"].copy_(xs[i % 2])
            launch()
            got[i].copy_(outs["y"])
    outs["y"].fill_(float("nan"))
    graph.replay()
    be._sync()
    bad = [i for i in range(steps) if not torch.equal(got[i].view(torch.int32), want[i % 2].view(torch.int32))]
    same = torch.equal(want[0], want[1])
    return ("ok" if not bad else f"MISMATCH at steps {bad}") + (" (the two x gave the same y!)" if same else "")


@contextlib.contextmanager
def module_globals(fam, values):
    """The family's module globals set to ``values`` inside the block (a probe of launch policies, not knobs)."""
    mod = sys.modules[type(fam).__module__]
    old = {k: getattr(mod, k) for k in values}
    for k, v in values.items():
        setattr(mod, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(mod, k, v)


def part_launches(fam, sms: int) -> dict:
    """Wrap fam.launch and fam.defines so that a genome registered in the returned dict (by id) gets its part's
    module globals and grid cap; every other genome is launched as the family says."""
    overrides: dict = {}
    launch, defines = fam.launch, fam.defines

    def launch_o(genome, geometry):
        o = overrides.get(id(genome))
        if o is None:
            return launch(genome, geometry)
        with module_globals(fam, o["module"]):
            lc = launch(genome, geometry)
        if o["blocks_per_sm"]:
            lc = type(lc)((min(lc.grid[0], sms * o["blocks_per_sm"]), *lc.grid[1:]), lc.block, lc.shared_bytes)
        return lc

    def defines_o(genome, spec):
        o = overrides.get(id(genome))
        with module_globals(fam, o["module"] if o else {}):
            return defines(genome, spec)

    fam.launch, fam.defines = launch_o, defines_o  # type: ignore[method-assign]
    return overrides


def main() -> int:
    cfg = load_config(sys.argv[1])
    spec = json.loads(Path(sys.argv[2]).read_text())
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    fam, geos = cfg.family, cfg.geometries
    cg = cfg.gates.correctness
    builder = Builder(fam, geos, cfg.arch)
    pdl_builder = Builder(fam, geos, cfg.arch, defines={"EVO_PDL": 1})  # the PDL parts: as gates.perf.launch: pdl
    nvml = Nvml()
    be = GpuBackend(fam, geos, builder, seeds=cg.seeds, runs=cg.runs, batch_ms=float(spec.get("batch_ms", 10.0)),
                    nvml=nvml if nvml.available() else None)
    # the probe's sources wait before reading x and writing y (the working tree's under EVO_PDL, session 16's
    # variants always): their launches may take PDL
    fam.pdl_safe = lambda g: True  # type: ignore[method-assign]
    base = fam.baseline()
    be.correctness(be.load(builder.build(base), base), freeze=True)
    ceiling = be.copy_ceiling()
    print(f"copy ceiling {ceiling['ceiling_tbps']:.3f} TB/s ({ceiling['method']})", flush=True)
    import torch

    overrides = part_launches(fam, torch.cuda.get_device_properties(0).multi_processor_count)
    parts = []
    for p in spec["parts"]:
        g = base.replace(**{**spec["genome"], **p.get("genome", {})})
        overrides[id(g)] = {"module": p.get("module", {}), "blocks_per_sm": p.get("blocks_per_sm")}
        src = Path(p["source"]).read_text() if p.get("source") else None
        built = (pdl_builder if p.get("pdl") else builder).build(g, base_source=src)
        v = be.load(built, g)
        v.pdl = bool(p.get("pdl"))
        res = {k.split(",")[0]: (m.resources.registers, m.resources.spills) for k, m in built.modules.items()}
        ev = be.correctness(v, freeze=False)
        verdict = correctness_gate(ev, be.baseline_hashes, cg.mode, None, be.baseline_errors, cg.tolerance_factor)
        plain = be.load(built, g)  # the same build launched plainly: what the chain must reproduce
        chains = {geo.name: chain_check(be, v, plain, geo) for geo in geos}
        lcs = {geo.name: fam.launch(g, geo) for geo in geos}
        print(f"{p['name']} (pdl {v.pdl}): grid/smem {({k: (lc.grid[0], lc.shared_bytes) for k, lc in lcs.items()})}; "
              f"regs/spills {res}; correctness {'ok' if verdict.ok else 'REJECTED'} "
              f"({verdict.reason}); chain {chains}", flush=True)
        parts.append((p["name"], v))
    for geo in geos:
        n = be.launches_for(parts[0][1], geo)
        s = be.measure(parts, geo, rounds, n)
        note = ""
        if not s.times_us[parts[0][0]]:  # every round throttled: say why, and time them as the card runs
            note = f" (every round throttled at first: {ClockSample(0.0, 0.0, s.clocks['throttle_reasons']).describe()})"
            nv, be.nvml = be.nvml, None
            s = be.measure(parts, geo, rounds, n)
            be.nvml = nv
        ref = parts[0][0]
        tr = statistics.median(s.times_us[ref])
        for name, _ in parts:
            t = statistics.median(s.times_us[name])
            ratios = sorted(r / x for r, x in zip(s.times_us[ref], s.times_us[name]))
            pct = fam.bytes_moved(geo) / (t * 1e-6) / (ceiling["ceiling_tbps"] * 1e12) * 100
            print(f"  {geo.name:22s} {name:8s} {t:8.2f} us (min {min(s.times_us[name]):.2f}, max "
                  f"{max(s.times_us[name]):.2f})  {ref}/{name} {tr / t:.3f}x (per round: median "
                  f"{statistics.median(ratios):.3f}, quartiles "
                  f"{ratios[len(ratios) // 4]:.3f}..{ratios[3 * len(ratios) // 4]:.3f})  {pct:.1f}% of the ceiling  "
                  f"(graph of {n} launches, {len(s.times_us[name])} rounds, discarded {s.discarded}, SM "
                  f"{s.clocks['sm_mhz_min']}-{s.clocks['sm_mhz_max']} MHz){note}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
