"""Sweep a family's knob space on the GPU and save it for the recorded backend.

    python tools/sweep.py configs/mhc_pre_big_fuse.yaml \
        --out candidates/mhc_pre_big_fuse/recorded/h200-sweep.json.xz [--limit-s 300]

    # a space too large for one run: shards, one per GPU or per call, then one file
    python tools/sweep.py configs/mhc_prenorm_gemm.yaml --shard 1/2 --out /tmp/s1.json.xz   # GPU 0
    python tools/sweep.py configs/mhc_prenorm_gemm.yaml --shard 2/2 --out /tmp/s2.json.xz   # GPU 1
    python tools/merge_sweeps.py /tmp/s1.json.xz /tmp/s2.json.xz \
        --out candidates/mhc_prenorm_gemm/recorded/h200-sweep.json.xz

For every valid genome (baseline first, the rest in a seeded random order so a
time-limited sweep is a uniform sample): compile (in parallel processes),
check correctness on every geometry x seed x run against the frozen baseline,
and time it interleaved with the baseline (``--rounds`` rounds of CUDA-graph
batches, each graph about ``--batch-ms`` of its own launches, as a campaign
times them; the genome's count is kept as ``n``). A genome that is the same
variant as one already swept (machine code and launch at every geometry,
evo/core/variant.py) is stored as ``same_as`` it; every entry records its
``sass`` and ``launch`` digests (sweeps before 2026-12-07 record the SASS alone
and linked by it: harness/recorded.py follows such a link only where the two
genomes launch alike). The A/A pairs of the baseline, the copy ceiling, device
facts and torch.compile peer timings are stored too, and so are the seed, the
knob space and the seeded order of its valid genomes (``space``), which the
merge checks.

``--shard I/N`` (I = 1..N) sweeps the baseline (every genome's times are
interleaved with it, so each shard measures it) and the valid genomes at
positions I, I+N, I+2N, ... of the seeded order after the baseline: the same
partition on any machine, each shard a uniform sample of the space, and a
time-limited shard stops after a uniform sample of its part. It applies to
``--compile-only`` too (each machine compiles only its shard). The file says
``shard: {index, count}``; ``tools/merge_sweeps.py`` joins the shards into one
file of this format. ``--peer off`` on all shards but one saves the torch.compile
timing there (the merge keeps the first shard's).

``--resume PREV`` continues a sweep that its time limit stopped (PREV: that file, unsharded, same config and
settings): it measures the baseline again and only the genomes PREV lacks, then writes PREV and the new part as
one file (``tools/merge_sweeps.py``'s ``resume``: PREV is the reference, the new part's times are scaled by its
own baseline as a shard's are, ``merged`` records both runs). With ``--redo KNOB=VALUE[,KNOB=VALUE...]`` it also
measures again the genomes of PREV that match (every pair), dropping their old entries: for a source change
that only those genomes' code sees (check their SASS first: the rest of PREV must still be what the tree builds).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import itertools
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from evo.config import ConfigError, load_config, restrict_knobs  # noqa: E402
from evo.core.genome import Genome  # noqa: E402
from evo.core.variant import LaunchError, launch_digest, variant_key  # noqa: E402
from harness import sweepfile  # noqa: E402
from harness.build import Builder, BuildError  # noqa: E402

_builder: Builder | None = None


def _init(config: str, arch: str) -> None:
    global _builder
    cfg = load_config(config)
    _builder = Builder.for_config(cfg, arch)


def _compile(key: str) -> tuple[str, str | None, str | None]:
    assert _builder is not None
    try:
        b = _builder.build(Genome.from_key(key))
        return key, b.sass_sha256, None
    except BuildError as e:
        return key, None, str(e)


def valid_order(fam, geos, seed: int) -> tuple[int, list[Genome]]:
    """(size of the knob product, the valid genomes: baseline first, the rest in the seeded random order)."""
    base = fam.baseline()
    names = [k.name for k in fam.knobs]
    space = [Genome(dict(zip(names, vals))) for vals in itertools.product(*(k.values for k in fam.knobs))]
    valid = [g for g in space if fam.check(g, geos) is None and g != base]
    random.Random(seed).shuffle(valid)
    return len(space), [base] + valid


def parse_shard(text: str) -> tuple[int, int]:
    """ "I/N" -> (I, N) with 1 <= I <= N."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N, e.g. 1/2") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {text!r}: need 1 <= I <= N")
    return i, n


def in_shard(position: int, index: int, count: int) -> bool:
    """Whether the genome at this position of the seeded order (0: the baseline) is swept by shard index/count."""
    return position == 0 or (position - 1) % count == index - 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--out", help="the sweep's .json.xz (required unless --compile-only)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--aa-rounds", type=int, default=30)
    ap.add_argument("--limit-s", type=float, default=1e9, help="stop measuring after this many seconds")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-ms", type=float, default=2.0, help="target duration of one timed graph replay")
    ap.add_argument("--peer", default="default", help="torch.compile mode for the peer timing, or off")
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="fill the cubin cache (EVO_CACHE_DIR) and stop: a later sweep then measures at once",
    )
    ap.add_argument(
        "--resume",
        default=None,
        help="a sweep file of this config stopped by its time limit: sweep the genomes it lacks and "
        "write both as one file",
    )
    ap.add_argument(
        "--redo", default=None, help="with --resume: KNOB=VALUE[,KNOB=VALUE...]: measure PREV's matching genomes again"
    )
    ap.add_argument(
        "--knobs",
        default=None,
        help="sweep a sub-space: the config's knobs: restriction as YAML, e.g. '{block: [256, 512], fast_math: "
        "[false, true]}' (each knob keeps its baseline value); a campaign on the recorded backend then searches "
        "the values swept",
    )
    ap.add_argument(
        "--shard",
        default="1/1",
        help="I/N: sweep the baseline and the I-th of N parts of the seeded order (merge: tools/merge_sweeps.py)",
    )
    args = ap.parse_args()
    if not args.out and not args.compile_only:
        ap.error("--out is required")
    if args.redo and not args.resume:
        ap.error("--redo goes with --resume PREV")
    try:
        shard_i, shard_n = parse_shard(args.shard)
    except ValueError as e:
        ap.error(str(e))
    t_start = time.monotonic()

    cfg = load_config(args.config)
    if args.knobs:
        try:
            wanted = yaml.safe_load(args.knobs)
            if not isinstance(wanted, dict) or not all(isinstance(k, str) for k in wanted):
                raise ConfigError(
                    f"--knobs {args.knobs!r}: expected a mapping of knob names, e.g. '{{block: [256, 512]}}'"
                )
            cfg.family = restrict_knobs(cfg.family, wanted, "--knobs")
        except (yaml.YAMLError, ConfigError) as e:
            ap.error(str(e).splitlines()[0])
    fam, geos = cfg.family, cfg.geometries
    builder = Builder.for_config(cfg, geometries=geos)
    base = fam.baseline()
    n_product, full = valid_order(fam, geos, args.seed)
    order = [g for j, g in enumerate(full) if in_shard(j, shard_i, shard_n)]
    prev = None
    if args.resume:
        from tools.merge_sweeps import load as load_sweep

        if shard_n > 1:
            ap.error("--resume continues an unsharded sweep")
        prev = load_sweep(args.resume)
        if (prev.get("launch") or "plain") != cfg.gates.perf.launch:  # before any GPU time is spent on it
            ap.error(
                f"{args.resume} timed {prev.get('launch') or 'plain'} launches; this config launches "
                f"{cfg.gates.perf.launch} (gates.perf.launch)"
            )
        if prev.get("space", {}).get("order") != [g.key for g in full]:
            ap.error(f"{args.resume} is not a sweep of this config's knob space and seed (the seeded order differs)")
        if args.redo:
            try:
                want = dict(kv.split("=", 1) for kv in args.redo.split(","))
            except ValueError:
                ap.error(f"--redo {args.redo!r}: give KNOB=VALUE pairs separated by commas")
            unknown = sorted(set(want) - {k.name for k in fam.knobs})
            if unknown:
                ap.error(f"--redo: no knob {unknown[0]!r} in {fam.name}")
            redo = [
                k
                for k in prev["genomes"]
                if k != prev["baseline_key"] and all(str(Genome.from_key(k)[n]) == v for n, v in want.items())
            ]
            gone = set(redo)
            gone |= {k for k, e in prev["genomes"].items() if e.get("same_as") in gone}  # no link to a dropped one
            redo = [k for k in prev["genomes"] if k in gone]
            for k in redo:
                del prev["genomes"][k]
            prev["stopped"] = f"{len(redo)} genome(s) dropped to be measured again (--redo {args.redo})"
            print(f"sweep: --redo {args.redo}: {len(redo)} genome(s) of {args.resume} measured again", flush=True)
        order = [g for g in order if g == base or g.key not in prev["genomes"]]  # the baseline: the new scale
        print(
            f"sweep: resuming {args.resume} ({len(prev['genomes'])} genomes recorded, {prev.get('stopped')})",
            flush=True,
        )
    part = f"shard {shard_i}/{shard_n}: {len(order)} of " if shard_n > 1 else ""
    print(f"sweep: {part}{len(full)} valid genomes of {n_product}; compiling with {args.jobs} processes", flush=True)

    sass: dict[str, str] = {}
    errors: dict[str, str] = {}
    pdl = cfg.gates.perf.launch == "pdl"
    launch: dict[str, str] = {}  # genome key -> launch digest at the config's geometries (no compile: cheap)
    for g in order:
        try:
            launch[g.key] = launch_digest(fam, g, geos, pdl)
        except LaunchError as e:  # recorded as such: the recorded backend answers it with the reason
            errors[g.key] = str(e)
    with cf.ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(args.config, builder.arch)) as ex:
        for key, s, err in ex.map(_compile, [g.key for g in order if g.key not in errors], chunksize=8):
            if s is not None:
                sass[key] = s
            else:
                errors[key] = err or "compile error"
    print(f"sweep: compiled in {time.monotonic() - t_start:.0f} s ({len(errors)} compile errors)", flush=True)
    if args.compile_only:
        return 0

    from harness.device import Nvml
    from harness.gpu import GpuBackend, KernelCrash

    nvml = Nvml()
    be = GpuBackend(
        fam,
        geos,
        builder,
        seeds=cfg.gates.correctness.seeds,
        runs=cfg.gates.correctness.runs,
        batch_ms=args.batch_ms,
        nvml=nvml if nvml.available() else None,
        pdl=cfg.gates.perf.launch == "pdl",  # timed as the config's campaigns launch (the builder has EVO_PDL)
    )
    facts = be.facts()
    ceiling = be.copy_ceiling()
    print(f"sweep: copy ceiling {ceiling}", flush=True)
    from evo.measure.ceiling import describe_floor, measure_floor

    try:  # the recorded backend serves it to campaigns replayed from this sweep (context, never a reason to stop)
        floor = measure_floor(be, fam, geos, cfg.gates.perf.launch, args.rounds)
        if floor.get("geometries"):
            floor["method"] = f"{floor.get('method', '')}; measured by the sweep"
    except Exception as e:  # noqa: BLE001
        floor = {"backend": be.name, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    print(f"sweep: {describe_floor(floor)}", flush=True)
    base_loaded = be.load(builder.build(base), base)
    ev = be.correctness(base_loaded, freeze=True)
    launches = {g.name: be.launches_for(base_loaded, g) for g in geos}
    aa = {}
    base_copy = be.load(builder.build(base), base)
    for g in geos:
        s = be.measure([("a", base_loaded), ("b", base_copy)], g, args.aa_rounds, launches[g.name])
        aa[g.name] = {"a": s.times_us["a"], "b": s.times_us["b"], "discarded": s.discarded}

    genomes: dict[str, dict] = {}
    by_variant: dict[str, str] = {}  # variant_key(sass, launch) -> the genome swept for it
    if prev is not None:  # a variant the earlier run measured is not measured again: same_as its genome there
        for k, e in prev["genomes"].items():
            if "status" in e and e.get("sass"):
                try:  # (a PREV from before launch digests: its genomes' launches, computed now)
                    lk = e.get("launch") or launch_digest(fam, Genome.from_key(k), geos, pdl)
                except LaunchError:
                    continue
                by_variant.setdefault(variant_key(e["sass"], lk), k)
    measured = 0
    stopped = "complete"
    for i, g in enumerate(order):
        if i > 0 and time.monotonic() - t_start > args.limit_s:  # the baseline always: every genome's reference
            stopped = f"time limit after {i} of {len(order)} genomes"
            break
        key = g.key
        if key in errors:
            status = "compile_error" if key in launch else "launch_error"
            genomes[key] = {"status": status, "reason": errors[key]}
            continue
        vk = variant_key(sass[key], launch[key])
        if vk in by_variant and g != base:
            genomes[key] = {"same_as": by_variant[vk], "sass": sass[key], "launch": launch[key]}
            continue
        by_variant[vk] = key
        entry: dict = {"sass": sass[key], "launch": launch[key], "status": "ok"}
        try:
            loaded = be.load(builder.build(g), g)
            ev = be.correctness(loaded, freeze=False) if g != base else ev
            entry["checks"] = [
                [
                    c.geometry,
                    c.seed,
                    c.output,
                    ["=" if h == be.baseline_hashes.get(f"{c.geometry}/{c.seed}/{c.output}") else h for h in c.hashes],
                    c.nonfinite,
                    c.unwritten,
                    c.rel_err,
                    c.max_abs,
                    c.mismatch,
                    c.oob_bytes,
                ]
                for c in ev.checks
            ]
            if ev.written_inputs:  # a launch changed an input (harness/inout.py): the recorded backend rejects it too
                entry["written_inputs"] = [[w.geometry, w.seed, w.input, w.changed, w.numel] for w in ev.written_inputs]
            broken = bool(ev.written_inputs) or any(
                c.nonfinite or c.unwritten or c.oob_bytes or len(set(c.hashes)) > 1 for c in ev.checks
            )
            if not broken:
                entry["t"], entry["b"], entry["disc"], entry["clk"], entry["n"] = {}, {}, {}, {}, {}
                for geo in geos:
                    # each graph about batch_ms of its own launches, as a campaign times them (evo/loop/campaign.py)
                    n = launches[geo.name] if g == base else be.launches_for(loaded, geo)
                    s = be.measure(
                        [("g", loaded), ("b", base_loaded)], geo, args.rounds, {"g": n, "b": launches[geo.name]}
                    )
                    entry["n"][geo.name] = n
                    entry["t"][geo.name] = [round(x, 4) for x in s.times_us["g"]]
                    entry["b"][geo.name] = [round(x, 4) for x in s.times_us["b"]]
                    entry["disc"][geo.name] = s.discarded
                    entry["clk"][geo.name] = s.clocks
                entry["recheck"] = be.recheck(loaded) if all(h == "=" for c in entry["checks"] for h in c[3]) else None
        except KernelCrash as e:
            entry = {"status": "crash", "reason": str(e)}
            genomes[key] = entry
            stopped = f"crash at genome {key}: {e}"
            break
        genomes[key] = entry
        measured += 1
        if measured % 50 == 0:
            el = time.monotonic() - t_start
            print(f"sweep: {i + 1}/{len(order)} genomes ({measured} measured) after {el:.0f} s", flush=True)

    peer = be.peer_torch_compile(args.peer, [g for g in geos if g.weight > 0]) if args.peer != "off" else {}
    out = {
        "format": 1,
        "family": fam.name,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv),
        "stopped": stopped,
        "device": facts,
        "copy_ceiling": ceiling,
        "latency_floor": floor,
        "geometries": [{"name": g.name, "params": dict(g.params), "weight": g.weight} for g in geos],
        "seeds": be.seeds,
        "runs": be.runs,
        "rounds": args.rounds,
        "aa_rounds": args.aa_rounds,
        "launches": launches,
        "batch_ms": args.batch_ms,
        "launch": cfg.gates.perf.launch,  # plain or pdl: a campaign is replayed only from a sweep timed its way
        "baseline_key": base.key,
        "baseline_hashes": be.baseline_hashes,
        "baseline_errors": be.baseline_errors,
        "aa": aa,
        "peer_torch_compile": peer,
        "seed": args.seed,
        "shard": {"index": shard_i, "count": shard_n, "genomes": len(order)},
        # what was swept: the merge checks that shards agree on it and finds the genomes none of them holds
        "space": {
            "knobs": {k.name: list(k.values) for k in fam.knobs},
            "product": n_product,
            "valid": len(full),
            "order": [g.key for g in full],
        },
        "genomes": genomes,
    }
    if prev is not None:
        from tools.merge_sweeps import MergeError, resume

        out["resumes"] = prev.get("created")
        try:
            out = resume((args.resume, prev), ("this run", out), True, "python " + " ".join(sys.argv))
        except MergeError as e:
            print(f"sweep: error: cannot join {args.resume} and this run: {e}", file=sys.stderr)
            return 2
        genomes, stopped = out["genomes"], out["stopped"]
    sweepfile.save(args.out, out)
    # A short table last: best per geometry against the baseline.
    print(f"sweep: {stopped}; {measured} measured, {len(genomes)} recorded, {time.monotonic() - t_start:.0f} s")
    for geo in geos:
        rows = []
        for k, e in genomes.items():
            if "t" in e:
                t = sorted(e["t"][geo.name])
                b = sorted(e["b"][geo.name])
                rows.append((b[len(b) // 2] / t[len(t) // 2], t[len(t) // 2], k))
        rows.sort(reverse=True)
        bytes_ = fam.bytes_moved(geo)
        for sp, t, k in rows[:3]:
            pct = 100 * bytes_ / (t * 1e-6) / (ceiling["ceiling_tbps"] * 1e12)
            print(f"  {geo.name}: {t:8.2f} us  {sp:.3f}x vs baseline  {pct:5.1f}% of copy ceiling  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
