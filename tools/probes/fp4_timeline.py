"""Timeline of the fp4 tma kernel: when each SM's items land and when its warps finish them (on the GPU).

    python3 tools/probes/fp4_timeline.py stamp KERNEL.cu STAMPED.cu
    python3 tools/probes/fp4_timeline.py configs/fp4_matvec.yaml GENOME.json GEOMETRY STAMPED.cu OUT.json.gz \
        [launches] [--pdl]

`stamp` adds the stamps to a kernel.cu (the committed one or a timing variant): every block stamps clock64 at its
start, after x's maximum and x's digits, the producer as it issues each item, and lane 0 of every consumer warp as
each item is visible to it (full barrier passed) and as it is done with it (before its release) and past its tile
end, with globaltimer at the start and the end. The kernel runs inside a CUDA graph of
`launches` back-to-back launches, as the harness times it; the stamps are the last launch's. Printed: the time a
launch takes in that graph, the SM clock the stamps imply, and per item the medians over the SMs with the most
items of when it was issued, landed and done, the warps' mean compute time on it, their mean wait for it (from their
previous stamp) and their mean tile end.
Raw stamps go to OUT.json.gz. --pdl: built with EVO_PDL=1 and launched with programmatic dependent launch (as
gates.perf.launch: pdl), each launch overlapping the one before; a block's times stay from its own start, which is
then before the launch before has ended, and the consumers' pass of griddepcontrol.wait is stamped too.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from evo.config import load_config  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.gpu import GpuBackend, _dtype  # noqa: E402

TL_BLOCKS, TL_WORDS, TL_WARP = 160, 2048, 128  # a consumer warp's slots: landed, done, tile end, half a landed
TL_LAUNCHES = 8192  # launches whose span (first block's start to last block's end, globaltimer) is kept

# (anchor in the tma section of kernel.cu, what replaces it); each anchor must occur exactly once
_CS = "  consumers_sync();\n"
_W = "lane == 0 && item < 32 && warp < 15"
_B = f"tl[64 + warp * {TL_WARP}"
STAMPS = [
    (
        "typedef unsigned long long u64;\n",
        "typedef unsigned long long u64;\n"
        "// timing variant (tools/probes/fp4_timeline.py): clock64 stamps per block, globaltimer at its start and end\n"
        f"#define TL_BLOCKS {TL_BLOCKS}\n#define TL_WORDS {TL_WORDS}\n"
        "__device__ u64 evo_tl[TL_BLOCKS * TL_WORDS];\n"
        # every launch's span: [2 l] its first start, [2 l + 1] its last end (atomics; launch l from counters that
        # each launch adds the grid to: the consumers' thread 0 at its start, the producer's lane 0 at its end)
        f"#define TL_LAUNCHES {TL_LAUNCHES}\n"
        "__device__ unsigned int evo_tl_started, evo_tl_pended;\n"
        "__device__ unsigned long long evo_tl_span[2 * TL_LAUNCHES];\n"
        '__device__ __forceinline__ u64 tl_gt() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); '
        "return t; }\n"
        '__device__ __forceinline__ u64 tl_clk() { u64 t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); '
        "return t; }\n",
    ),
    [
        (
            a,
            a + "  u64* tl = evo_tl + (size_t)(blockIdx.x < TL_BLOCKS ? blockIdx.x : 0) * TL_WORDS;\n"
            '  if (threadIdx.x == 0) {\n    u32 smid;\n    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));\n'
            "    tl[0] = tl_gt();\n    tl[1] = tl_clk();\n    tl[6] = (u64)nitems;\n    tl[7] = (u64)smid;\n"
            "    tl[14] = atomicAdd(&evo_tl_started, 1u) / gridDim.x;\n"
            "    if (tl[14] < TL_LAUNCHES) atomicMin(&evo_tl_span[2 * tl[14]], (unsigned long long)tl[0]);\n  }\n",
        )
        for a in (
            "  const int nitems = sched.items;\n",
            "  const int nitems = my_tiles * TNSTEP;\n",
            "  const int nitems = my_tiles * TNSTEP * TIH;\n",
        )
    ],
    # the producer as it issues an item (its first half)
    [
        (
            "      if (lane == 0) {\n        if (bytes_a) mbar_expect_tx",
            "      if (lane == 0 && item < 32) tl[16 + item] = tl_clk();\n"
            "      if (lane == 0) {\n        if (bytes_a) mbar_expect_tx",
        ),
        (
            "      // a step's bytes: 17 * TKB",
            "      if (lane == 0 && item < 32) tl[16 + item] = tl_clk();\n      // a step's bytes: 17 * TKB",
        ),
        # the item's source from a helper
        (
            "      u32 bytes;\n      const u8* src = item_src(",
            "      if (lane == 0 && item < 32) tl[16 + item] = tl_clk();\n"
            "      u32 bytes;\n      const u8* src = item_src(",
        ),
    ],
    (
        "    return;\n  }\n\n  // x's exponent",  # the producer's end (it writes y)
        "    if (lane == 0) {\n      tl[8] = tl_clk();\n      tl[9] = tl_gt();\n"
        "      const unsigned int l_ = atomicAdd(&evo_tl_pended, 1u) / gridDim.x;\n"
        "      if (l_ < TL_LAUNCHES) atomicMax(&evo_tl_span[2 * l_ + 1], (unsigned long long)tl[9]);\n    }\n"
        "    return;\n  }\n\n  // x's exponent",
    ),
    (_CS + "  mb = s_max[0];\n", _CS + "  if (threadIdx.x == 0) tl[5] = tl_clk();\n  mb = s_max[0];\n"),
    (
        _CS + "\n  const int gq = lane >> 2, t = lane & 3;\n",
        _CS + "  if (threadIdx.x == 0) tl[4] = tl_clk();\n\n  const int gq = lane >> 2, t = lane & 3;\n",
    ),
    [
        (
            "    mbar_wait(full + st, (u32)((item / TNSTAGE) & 1));\n",
            f"    mbar_wait(full + st, (u32)((item / TNSTAGE) & 1));\n    if ({_W}) {_B} + item] = tl_clk();\n",
        ),
        # items in two halves: the first half's landing in the fourth slots
        (
            "      mbar_wait((half == 0 ? full_a : full) + st, (u32)((item / TNSTAGE) & 1));\n",
            "      mbar_wait((half == 0 ? full_a : full) + st, (u32)((item / TNSTAGE) & 1));\n"
            f"      if ({_W}) {_B} + (half == 0 ? 96 : 0) + item] = tl_clk();\n",
        ),
        # item 0 in two parts
        (
            "      mbar_wait(part == 0 ? first : full + st, part == 0 ? 0u : (u32)((item / TNSTAGE) & 1));\n",
            "      mbar_wait(part == 0 ? first : full + st, part == 0 ? 0u : (u32)((item / TNSTAGE) & 1));\n"
            f"      if ({_W}) {_B} + (part == 0 ? 96 : 0) + item] = tl_clk();\n",
        ),
    ],
    [
        (
            "    __syncwarp();\n    if (lane == 0) mbar_arrive(empty + st);",
            f"    __syncwarp();\n    if ({_W}) {_B} + 32 + item] = tl_clk();\n"
            "    if (lane == 0) mbar_arrive(empty + st);",
        ),
        # every lane arrives
        (
            "    mbar_arrive(empty + st);  // every lane",
            f"    if ({_W}) {_B} + 32 + item] = tl_clk();\n    mbar_arrive(empty + st);  // every lane",
        ),
        (
            "      __syncwarp();\n      if (lane == 0) mbar_arrive((half == 0 ? empty_a : empty) + st);",
            f"      __syncwarp();\n      if (half == 1 && {_W}) {_B} + 32 + item] = tl_clk();\n"
            "      if (lane == 0) mbar_arrive((half == 0 ? empty_a : empty) + st);",
        ),
    ],
    # past the tile end (inside the last-step branch), and the block's end after the item loop
    (
        "          for (int c = 0; c < 2; ++c) acc[v][h][c] = 0.0f;\n    }\n  }\n",
        "          for (int c = 0; c < 2; ++c) acc[v][h][c] = 0.0f;\n"
        f"      if ({_W}) {_B} + 64 + item] = tl_clk();\n    }}\n  }}\n"
        "  if (threadIdx.x == 0) {\n    tl[3] = tl_clk();\n    tl[2] = tl_gt();\n"
        "    if (tl[14] < TL_LAUNCHES) atomicMax(&evo_tl_span[2 * tl[14] + 1], (unsigned long long)tl[2]);\n  }\n",
    ),
]


# stamps of some kernels only, applied where the anchor occurs once: the dynamic schedule's item count
OPTIONAL = [
    # the consumers past griddepcontrol.wait (kernels with PDL)
    (
        "  if (warp < TNCW) pdl_wait();  // x may be the launch before's output (above)\n",
        "  if (warp < TNCW) pdl_wait();  // x may be the launch before's output (above)\n"
        "  if (threadIdx.x == 0) tl[15] = tl_clk();\n",
    ),
    (
        "    while (reduced < ntj) tile_rows(",
        "    if (lane == 0) tl[6] = (u64)ntj * TNSTEP;\n    while (reduced < ntj) tile_rows(",
    ),
    (
        "    while (reduced < done_tiles) tile_rows(",
        "    if (lane == 0) tl[6] = (u64)done_tiles * TNSTEP;\n    while (reduced < done_tiles) tile_rows(",
    ),
]


def stamp(src: str) -> str:
    """kernel.cu with the timeline's stamps (tma section): stops where an anchor is missing or repeated (a list
    holds alternatives in order, for kernels before and after a change: the first one found once is used)."""
    for entry in STAMPS:
        alts = entry if isinstance(entry, list) else [entry]
        hits = [(a, r) for a, r in alts if src.count(a) == 1]
        if not hits or src.count(hits[0][0]) != 1:
            raise SystemExit(f"stamp: anchor {alts[0][0].strip()[:60]!r} (or its alternatives) not found once")
        src = src.replace(*hits[0])
    for a, r in OPTIONAL:
        if src.count(a) == 1:
            src = src.replace(a, r)
    return src


def main() -> int:
    if sys.argv[1] == "stamp":
        Path(sys.argv[3]).write_text(stamp(Path(sys.argv[2]).read_text()))
        return 0
    pdl = "--pdl" in sys.argv
    argv = [a for a in sys.argv if a != "--pdl"]
    cfg = load_config(argv[1])
    fam = cfg.family
    genome = fam.baseline().replace(**json.loads(Path(argv[2]).read_text()))
    geo = next(g for g in cfg.geometries if g.name == argv[3])
    source = Path(argv[4]).read_text()
    out_path = Path(argv[5])
    launches = int(argv[6]) if len(argv) > 6 else 200
    builder = Builder(fam, cfg.geometries, cfg.arch, defines={"EVO_PDL": 1} if pdl else None)
    be = GpuBackend(fam, cfg.geometries, builder)
    built = builder.build(genome, base_source=source)
    cupy, torch = be.cupy, be.torch
    m = built.modules[builder.spec_of(geo)]
    mod = cupy.RawModule(path=m.cubin_path)
    fn = mod.get_function(m.function)
    lc = fam.launch(genome, geo)
    if lc.shared_bytes > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = lc.shared_bytes
    outs = {o.name: torch.empty(o.shape, dtype=_dtype(o.dtype), device=be.device) for o in fam.outputs(geo)}
    args = be._args(be.inputs(geo, 0), outs, geo)

    # every launch's span (the stamps' atomics): counters at 0, starts at the largest value, ends at 0
    span_ptr = mod.get_global("evo_tl_span")
    span = cupy.ndarray((2 * TL_LAUNCHES,), dtype=cupy.uint64, memptr=span_ptr)
    span[0::2] = cupy.uint64(2**64 - 1)
    span[1::2] = cupy.uint64(0)
    for name in ("evo_tl_started", "evo_tl_pended"):
        cupy.ndarray((1,), dtype=cupy.uint32, memptr=mod.get_global(name))[...] = 0
    cupy.cuda.Device().synchronize()

    def launch() -> None:
        with be._cupy_stream(torch.cuda.current_stream().cuda_stream):
            fn(lc.grid, lc.block, args, shared_mem=lc.shared_bytes)

    pdl = pdl and fam.pdl_safe(genome)
    if pdl:
        from harness.driver_launch import launcher

        ex = launcher(fn.kernel.ptr, lc.grid, lc.block, lc.shared_bytes, fam.arg_types(), args, pdl=True)

        def launch() -> None:  # noqa: F811 - the PDL form replaces the plain one
            ex(torch.cuda.current_stream().cuda_stream)

    graph = be._graph(launch, launches)
    for _ in range(20):  # the clock leaves idle
        be._time_graph(graph)
    us = statistics.median(be._time_graph(graph) for _ in range(5)) / launches
    tl_ptr = mod.get_global("evo_tl")
    host = cupy.ndarray((TL_BLOCKS * TL_WORDS,), dtype=cupy.uint64, memptr=tl_ptr).get()
    nblk = min(lc.grid[0], TL_BLOCKS)
    raw = [[int(v) for v in host[b * TL_WORDS : (b + 1) * TL_WORDS]] for b in range(nblk)]
    ncw = (lc.block[0] - 32) // 32
    S = TL_WARP
    nl = min(
        int(cupy.ndarray((1,), dtype=cupy.uint32, memptr=mod.get_global("evo_tl_started")).get()[0]) // lc.grid[0],
        TL_LAUNCHES,
    )
    sp = span.get()
    spans = [(int(sp[2 * i + 1]) - int(sp[2 * i])) / 1000 for i in range(nl) if sp[2 * i + 1] > sp[2 * i]]
    last = sorted(spans[-5 * launches :])  # the timed graphs' launches
    with gzip.open(out_path, "wt") as f:
        json.dump(
            {
                "genome": dict(genome),
                "geometry": geo.name,
                "launches": launches,
                "us_per_launch": us,
                "pdl": pdl,
                "consumer_warps": ncw,
                "warp_slots": S,
                "launch_spans_us": spans[-5 * launches :],
                "blocks": raw,
            },
            f,
        )

    for r in raw:  # the block's end: its consumers' or its producer's, whichever is later
        if r[9] > r[2]:
            r[2], r[3] = r[9], r[8]
    gt0 = min(r[0] for r in raw)
    rates = [(r[3] - r[1]) / (r[2] - r[0]) for r in raw if r[2] > r[0]]
    ghz = statistics.median(rates)
    print(
        f"{dict(genome)} at {geo.name}: {us:.2f} us a launch in a graph of {launches} "
        f"({'PDL' if pdl else 'plain'} launches); "
        f"SM clock from the stamps {ghz:.3f} GHz (min {min(rates):.3f}, max {max(rates):.3f})"
    )
    if last:
        q = lambda p: last[min(len(last) - 1, int(p * len(last)))]  # noqa: E731
        print(
            f"every launch's span ({len(last)} launches of the timed graphs): median {q(0.5):.2f} us "
            f"(10% {q(0.1):.2f}, 90% {q(0.9):.2f}, max {last[-1]:.2f}); a launch's median less its median span "
            f"{us - q(0.5):.2f} us"
        )
    span = (max(r[2] for r in raw) - gt0) / 1000
    starts = sorted((r[0] - gt0) / 1000 for r in raw)
    print(
        f"blocks start over {starts[-1]:.2f} us (median {statistics.median(starts):.2f}); last block ends "
        f"{span:.2f} us after the first starts"
    )
    most = max(r[6] for r in raw)
    for n in sorted({r[6] for r in raw}, reverse=True):
        rows = [r for r in raw if r[6] == n]

        def ns(r, v):  # a stamp of block r in µs after its own start
            return (v - r[1]) / ghz / 1000

        med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
        ends = [ns(r, r[3]) for r in rows]
        part0 = [ns(r, min(r[64 + w * S + 96] for w in range(ncw))) for r in rows if r[64 + 96] > r[1]]
        waited = [ns(r, r[15]) for r in rows if r[15] > r[1]]  # the consumers past griddepcontrol.wait
        print(
            f"-- {len(rows)} blocks with {n} items: "
            + (f"past the wait {med(waited):.2f} us (max {max(waited):.2f}), " if waited else "")
            + f"x max {med([ns(r, r[5]) for r in rows]):.2f} us, x digits "
            f"{med([ns(r, r[4]) for r in rows]):.2f} us, end {med(ends):.2f} us (max {max(ends):.2f})"
            + (f", item 0's first half landed {med(part0):.2f} us" if part0 else "")
        )
        if n != most and n != most - 1:
            continue
        print(
            "   item  issued  landed  done(max)  compute  wait  tile end  a landed  (µs after the block's start; "
            "medians)"
        )
        tw = tc = te = 0.0
        for i in range(min(n, 32)):
            iss = med([ns(r, r[16 + i]) for r in rows])
            land = med([ns(r, min(r[64 + w * S + i] for w in range(ncw))) for r in rows])
            land_a = med(
                [ns(r, min(r[64 + w * S + 96 + i] for w in range(ncw))) for r in rows if r[64 + 96 + i] > r[1]]
            )  # the first half's, where items land in halves
            done = med([ns(r, max(r[64 + w * S + 32 + i] for w in range(ncw))) for r in rows])
            comp = med(
                [
                    statistics.mean(ns(r, r[64 + w * S + 32 + i]) - ns(r, r[64 + w * S + i]) for w in range(ncw))
                    for r in rows
                ]
            )
            # a warp's previous stamp: x's digits, or its last item's done (its tile end's, where it had one)
            prev = (
                (lambda r, w, i=i: r[4])
                if i == 0
                else (lambda r, w, i=i: r[64 + w * S + 64 + i - 1] or r[64 + w * S + 32 + i - 1])
            )
            tend = med(
                [
                    statistics.mean(ns(r, r[64 + w * S + 64 + i]) - ns(r, r[64 + w * S + 32 + i]) for w in range(ncw))
                    for r in rows
                    if r[64 + 64 + i]
                ]
            )
            wait = med(
                [
                    statistics.mean(max(0.0, ns(r, r[64 + w * S + i]) - ns(r, prev(r, w))) for w in range(ncw))
                    for r in rows
                ]
            )
            tw += wait
            tc += comp
            te += 0.0 if tend != tend else tend
            print(f"   {i:4d} {iss:7.2f} {land:7.2f} {done:9.2f} {comp:8.2f} {wait:6.2f} {tend:8.2f} {land_a:9.2f}")
        print(f"   sums: compute {tc:.2f} us, tile ends {te:.2f} us, waits {tw:.2f} us (from x's digits)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
