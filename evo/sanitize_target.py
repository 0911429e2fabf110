"""What compute-sanitizer watches: one genome's kernel launched once per geometry of the config, weighted and
watched (a watched geometry's kernel ships too), on seed-0 inputs.

    python -m evo.sanitize_target <config> <genome file>

The genome file is what :func:`evo.measure.sanitize.write_genome_file` writes. Outputs
are exact-size tensors (no guard bands: a write past an output's end must fall
outside its allocation for memcheck to see it; evo.measure.sanitize turns torch's
caching allocator off for the same reason), poisoned before the launch so
initcheck never blames the harness (an in-out output holds a copy of its input,
as in the campaign). Exit codes: 0 ran, 3 no GPU, 4 could not set up, 5 the
launch failed (the sanitizer's report says why).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evo.measure.sanitize import TARGET_CRASH, TARGET_FAILED, TARGET_NO_GPU, TARGET_PREFIX


def _say(msg: str) -> None:
    print(f"{TARGET_PREFIX} {msg}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        _say("usage: python -m evo.sanitize_target <config> <genome file>")
        return TARGET_FAILED
    from evo.config import ConfigError, load_config
    from evo.core.genome import Genome
    from evo.search.ideas import book_from_meta, idea_hook
    from harness.build import Builder, BuildError

    try:
        cfg = load_config(args[0])
        spec = json.loads(Path(args[1]).read_text())
        fam = cfg.family
        if spec.get("family") != fam.name:
            raise ValueError(f"the genome file is for family {spec.get('family')!r}, the config's is {fam.name!r}")
        genome = Genome(spec["genome"])
        geoms = sorted(cfg.geometries, key=lambda g: g.weight <= 0)  # weighted first; watched ones ship too
        builder = Builder.for_config(cfg, source_hook=idea_hook(book_from_meta(spec.get("ideas"))), geometries=geoms)
        built = builder.build(genome, fam.faulty_source(spec["fault"]) if spec.get("fault") else None)
    except (ConfigError, BuildError, OSError, ValueError, KeyError) as e:
        _say(f"cannot set up: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
        return TARGET_FAILED
    _say(f"built {fam.name} {genome.key} ({len(built.modules)} module(s), arch {builder.arch})")

    from harness.gpu import GpuBackend, KernelCrash, gpu_available
    from harness.inout import initial_values, start_outputs

    if not gpu_available():
        _say("no CUDA GPU visible")
        return TARGET_NO_GPU
    import torch

    backend = GpuBackend(fam, geoms, builder, seeds=1, runs=1)
    try:
        loaded = backend.load(built, genome)
        for g in geoms:
            specs = fam.outputs(g)
            outs = {o.name: torch.empty(o.shape, dtype=getattr(torch, o.dtype), device=backend.device) for o in specs}
            inputs = backend.inputs(g, 0)
            with torch.cuda.stream(backend.stream):
                start_outputs(outs, initial_values(specs, inputs), 0xA5)  # in-out ones: a copy of their input
                backend._launcher(loaded, g, inputs, outs)()
            backend._sync()
            lc = fam.launch(genome, g)
            fn = built.modules[builder.spec_of(g)].function  # a template entry's instantiation by its lowered name
            _say(f"launched {fn} at {g.name}: grid {lc.grid}, block {lc.block}, {lc.shared_bytes} B shared")
    except KernelCrash as e:
        _say(f"the launch failed: {e}")
        return TARGET_CRASH
    except Exception as e:  # module load, launch configuration: say it on one line for the report
        _say(f"the launch could not be made: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
        return TARGET_FAILED
    _say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
