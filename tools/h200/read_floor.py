"""Probe: how fast can any kernel read a decode-sized matrix, launched back to back? (on the GPU)

    python3 tools/h200/read_floor.py configs/fp4_matvec.yaml SPEC.json

SPEC.json as tools/h200/ceiling_probe.py's ({"genome": ..., "geometry": NAME, optionally "source"}). In one
process, timed as the harness times (CUDA-graph batches of ~10 ms, per launch, median of 7):
- an empty kernel with the genome's launch shape (grid, block, dynamic shared memory) and with a 1-thread block:
  the launch floor every launch pays;
- a plain read of the geometry's bytes (bytes_moved, rounded down to 16): 16-byte loads, `unroll` of them in
  flight a thread, grid-stride over blocks a SM x threads, every loaded word folded into a value stored only if
  it matches an impossible pattern; the best configuration is the floor of a kernel that reads those bytes;
- the same read of 4 GiB (its rate against the copy ceiling);
- the genome itself, and the copy ceiling (harness GpuBackend.copy_ceiling).
A probe: nothing is recorded in a ledger.
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
from tools.h200.graph_timing import time_launch  # noqa: E402

SRC = r'''
extern "C" __global__ void empty_kernel(int) {}
template <int U>
__device__ void read_body(const uint4* __restrict__ a, unsigned long long n, unsigned int* out) {
  unsigned int acc = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = a[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = a[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // (never, for these inputs: keeps the loads)
}
extern "C" __global__ void read1(const uint4* a, unsigned long long n, unsigned int* out) { read_body<1>(a, n, out); }
extern "C" __global__ void read4(const uint4* a, unsigned long long n, unsigned int* out) { read_body<4>(a, n, out); }
extern "C" __global__ void read8(const uint4* a, unsigned long long n, unsigned int* out) { read_body<8>(a, n, out); }
'''


def main() -> int:
    cfg = load_config(sys.argv[1])
    spec = json.loads(Path(sys.argv[2]).read_text())
    fam = cfg.family
    geo = next(g for g in cfg.geometries if g.name == spec["geometry"])
    builder = Builder(fam, [geo], cfg.arch)
    be = GpuBackend(fam, [geo], builder, seeds=1, runs=1, batch_ms=10.0)
    cupy = be.cupy
    g = fam.baseline().replace(**spec["genome"])
    src = Path(spec["source"]).read_text() if spec.get("source") else None
    v = be.load(builder.build(g, base_source=src), g)
    lc = fam.launch(g, geo)
    bytes_ = fam.bytes_moved(geo)
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    mod = cupy.RawModule(code=SRC, options=("-std=c++17",))
    out = cupy.zeros(4, dtype=cupy.uint32)

    def timed(launch, label: str, nbytes: int | None) -> float:
        return time_launch(be, launch, label, nbytes)

    e = mod.get_function("empty_kernel")
    e.max_dynamic_shared_size_bytes = lc.shared_bytes
    timed(lambda: e(lc.grid, lc.block, (cupy.int32(0),), shared_mem=lc.shared_bytes),
          f"empty, the genome's shape {lc.grid}x{lc.block}, {lc.shared_bytes} B", None)
    timed(lambda: e((1,), (1,), (cupy.int32(0),)), "empty, 1 block of 1 thread", None)

    n16 = bytes_ // 16
    a = cupy.random.random(n16 * 2, dtype=cupy.float64)  # random, never zeros
    best = None
    for u in (1, 4, 8):
        fn = mod.get_function(f"read{u}")
        for bps in (1, 2, 4, 8):
            for th in (256, 512, 1024):
                if bps * th > 2048:
                    continue
                us = timed(lambda fn=fn, bps=bps, th=th: fn((sms * bps,), (th,), (a, cupy.uint64(n16), out)),
                           f"read {n16 * 16} B: {bps} blocks a SM x {th} threads, {u} loads in flight", n16 * 16)
                if best is None or us < best[0]:
                    best = (us, u, bps, th)
    del a
    big = 4 * 2**30 // 16
    b = cupy.random.random(big * 2, dtype=cupy.float64)
    _, u, bps, th = best
    fn = mod.get_function(f"read{u}")
    timed(lambda: fn((sms * bps,), (th,), (b, cupy.uint64(big), out)), "read 4 GiB, the best shape above", big * 16)
    del b

    s = be.measure([("v", v)], geo, 7)
    tk = statistics.median(s.times_us["v"])
    c = be.copy_ceiling()
    print(f"genome {json.dumps(spec['genome'], sort_keys=True)} at {geo.name}: {tk:.2f} us a launch = "
          f"{bytes_ / (tk * 1e-6) / 1e12:.3f} TB/s ({bytes_} B)", flush=True)
    print(f"copy ceiling {c['ceiling_tbps']:.3f} TB/s ({c['method']})", flush=True)
    def pct(nbytes: int, us: float) -> float:
        return nbytes / (us * 1e-6) / 1e12 / c["ceiling_tbps"] * 100

    print(f"best read of the geometry's bytes: {best[0]:.2f} us ({best[2]} blocks a SM x {best[3]} threads, {best[1]} "
          f"loads in flight) = {pct(n16 * 16, best[0]):.1f}% of the copy ceiling; the genome takes "
          f"{tk / best[0]:.3f}x its time, {pct(bytes_, tk):.1f}% of the ceiling", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
