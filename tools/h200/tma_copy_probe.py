"""Probe: how fast does a bulk-copy ring deliver the anchor's weights, by copy size and kind? (on the GPU)

    python3 tools/h200/tma_copy_probe.py configs/fp4_matvec.yaml

The fp4 tma kernel's ring without its arithmetic, one persistent block a SM (a producer warp, a consumer warp that
only waits for each item and releases it), the anchor's 18432 rows x 3808 bytes in items of 16 rows x S bytes
(tiles of 16 rows round-robin over the blocks, each tile's S-byte steps in order), through NST stages:
- bulk: one cp.async.bulk a row (S bytes; 16 a item), as the kernel copies;
- tensor: one cp.async.bulk.tensor.2d a item (a 16-row box of the weights seen as u32 or u64 words; a tensor map
  made with the driver's cuTensorMapEncodeTiled, kept in global memory).
Timed as the harness times (CUDA-graph batches of ~10 ms, per launch, median of 7). Session 12 call b: items of
16 x 544 bytes (7 a row) made the kernel 2.2x slower; this asks whether the copies' count or the ring is the cost.
Call c's answer (logs/h200/2026-12-01-session12/c): the count. Bulk copies of 544 bytes 34.8 µs, of whole rows 18.0;
tensor boxes of 16 x 544 bytes 17.8. A probe: nothing is recorded in a ledger.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo.config import load_config  # noqa: E402
from harness.build import Builder  # noqa: E402
from harness.gpu import GpuBackend  # noqa: E402
from tools.h200.graph_timing import time_launch  # noqa: E402

ROWS, ROWB = 18432, 3808

SRC = r'''
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;
extern __shared__ __align__(1024) u8 dsm[];
__device__ __forceinline__ u32 sa(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait(u64* bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(sa(bar)), "r"(parity) : "memory");
  } while (!done);
}
extern "C" __global__ void __launch_bounds__(64) ring(const u8* __restrict__ w, u64 tmap, int out, u32* sink) {
  u8* ring = dsm;
  u64* full = reinterpret_cast<u64*>(ring + NST * 16 * PITCH);
  u64* empty = full + NST;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ntiles = out / 16;
  const int my_tiles = (int)blockIdx.x < ntiles ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  constexpr int nsteps = ROWB / S;
  const int nitems = my_tiles * nsteps;
  if (threadIdx.x == 0) {
    for (int s = 0; s < NST; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(full + s)) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(empty + s)) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    for (int item = 0; item < nitems; ++item) {
      const int st = item % NST;
      if (item >= NST) wait(empty + st, (u32)((item / NST - 1) & 1));
      const int tile = (int)blockIdx.x + (item / nsteps) * (int)gridDim.x, s = item % nsteps;
      if (lane == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(full + st)), "r"(16 * S)
                     : "memory");
      __syncwarp();
#if TENSOR
      if (lane == 0)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                     ::"r"(sa(ring + st * 16 * PITCH)), "l"(tmap), "r"(s * (S / WORD)), "r"(tile * 16), "r"(sa(full + st))
                     : "memory");
#else
      if (lane < 16)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     ::"r"(sa(ring + (st * 16 + lane) * PITCH)), "l"(w + (size_t)(tile * 16 + lane) * ROWB + (size_t)s * S),
                     "r"(S), "r"(sa(full + st)) : "memory");
#endif
    }
  } else {
    u32 acc = 0;
    for (int item = 0; item < nitems; ++item) {
      const int st = item % NST;
      wait(full + st, (u32)((item / NST) & 1));
      acc ^= reinterpret_cast<const u32*>(ring + st * 16 * PITCH)[lane];
      __syncwarp();
      if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sa(empty + st)) : "memory");
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;  // (never, for these inputs: keeps the reads)
  }
}
'''


def tensor_map(ptr: int, word: int, box_words: int) -> bytes:
    """A CUtensorMap (128 bytes) of the weights as [ROWS][ROWB / word] words, boxes of box_words x 16 rows."""
    lib = ctypes.CDLL("libcuda.so.1")
    buf = (ctypes.c_ubyte * 256)()
    base = (ctypes.addressof(buf) + 63) // 64 * 64  # 64-byte aligned
    dims = (ctypes.c_uint64 * 2)(ROWB // word, ROWS)
    strides = (ctypes.c_uint64 * 1)(ROWB)
    box = (ctypes.c_uint32 * 2)(box_words, 16)
    estr = (ctypes.c_uint32 * 2)(1, 1)
    dtype = {4: 2, 8: 4}[word]  # CU_TENSOR_MAP_DATA_TYPE_UINT32, _UINT64
    f = lib.cuTensorMapEncodeTiled
    f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    rc = f(base, dtype, 2, ctypes.c_void_p(ptr), dims, strides, box, estr, 0, 0, 0, 0)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled: CUresult {rc}")
    return bytes((ctypes.c_ubyte * 128).from_address(base))


def main() -> int:
    cfg = load_config(sys.argv[1])
    fam = cfg.family
    geo = next(g for g in cfg.geometries if g.name == "in7168_out18432")
    builder = Builder(fam, [geo], cfg.arch)
    be = GpuBackend(fam, [geo], builder, seeds=1, runs=1, batch_ms=10.0)
    cupy = be.cupy
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    w = cupy.random.randint(0, 256, ROWS * ROWB, dtype=cupy.uint8)  # random bytes, never zeros
    sink = cupy.zeros(4, dtype=cupy.uint32)

    maps = {}
    for kind, S, nst in (("bulk", 3808, 2), ("bulk", 3808, 3), ("bulk", 1904, 4), ("bulk", 1904, 6),
                         ("bulk", 544, 13), ("bulk", 544, 20), ("tensor", 1904, 4), ("tensor", 1904, 6),
                         ("tensor", 544, 13), ("tensor", 544, 20), ("tensor", 272, 26), ("tensor", 272, 40)):
        tensor = kind == "tensor"
        word = 8 if S > 1024 else 4
        pitch = S if tensor else S + (16 if (S // 4) % 8 == 0 else 0)
        smem = nst * 16 * pitch + 16 * nst
        mod = cupy.RawModule(code=SRC, options=("-std=c++17", f"-DNST={nst}", f"-DS={S}", f"-DPITCH={pitch}",
                                                 f"-DROWB={ROWB}", f"-DTENSOR={int(tensor)}", f"-DWORD={word}"))
        fn = mod.get_function("ring")
        fn.max_dynamic_shared_size_bytes = smem
        tmap = 0
        if tensor:
            key = (word, S // word)
            if key not in maps:
                maps[key] = cupy.asarray(bytearray(tensor_map(w.data.ptr, word, S // word)), dtype=cupy.uint8)
            tmap = maps[key].data.ptr
        time_launch(be, lambda fn=fn, smem=smem, tmap=tmap: fn((sms,), (64,), (w, cupy.uint64(tmap), cupy.int32(ROWS),
                                                                     sink), shared_mem=smem),
                    f"{kind:6s} rows of {S:4d} B, {16 * S:5d} B items, {nst:2d} stages ({smem} B)", ROWS * ROWB)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
