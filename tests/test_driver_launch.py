"""harness/driver_launch.py: the structures cuLaunchKernelEx takes, and (on a GPU) launches that match CuPy's."""

from __future__ import annotations

import ctypes

import pytest

from harness import driver_launch as dl


def test_structures_follow_cuda_h():
    # cuda.h: CUlaunchAttribute = id, 4 bytes of padding, a 64-byte value union; CUlaunchConfig's fields in order
    assert ctypes.sizeof(dl._Attr) == 72 and dl._Attr.value.offset == 8
    assert [f[0] for f in dl._Config._fields_][-3:] == ["hStream", "attrs", "numAttrs"]
    assert dl._Config.sharedMemBytes.offset == 24 and dl._Config.hStream.offset == 32
    assert dl._Config.attrs.offset == 40 and dl._Config.numAttrs.offset == 48


def test_config_carries_the_pdl_attribute_only_when_asked():
    cfg, attrs = dl.launch_config((132, 1, 1), (288, 1, 1), 153200, 0x1234, pdl=True)
    assert (cfg.gridDimX, cfg.blockDimX, cfg.sharedMemBytes, cfg.hStream) == (132, 288, 153200, 0x1234)
    assert cfg.numAttrs == 1 and cfg.attrs[0].id == dl.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert cfg.attrs[0].value.i == 1
    assert dl.launch_config((1, 1, 1), (32, 1, 1), 0, 0, pdl=False)[0].numAttrs == 0


def test_packed_arguments_point_at_their_values():
    arr, holders = dl.pack_args("pif", [0xDEADBEEF00, -7, 1.5])
    assert ctypes.cast(arr[0], ctypes.POINTER(ctypes.c_uint64)).contents.value == 0xDEADBEEF00
    assert ctypes.cast(arr[1], ctypes.POINTER(ctypes.c_int32)).contents.value == -7
    assert ctypes.cast(arr[2], ctypes.POINTER(ctypes.c_float)).contents.value == 1.5
    with pytest.raises(ValueError, match="unknown kernel argument type"):
        dl.pack_args("q", [1])
    with pytest.raises(ValueError, match="2 kernel arguments"):
        dl.pack_args("p", [1, 2])


_SRC = r"""
extern "C" __global__ void axpy(const float* x, float* y, int n, float a) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");  // y may be the launch before's output
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [False, True])
def test_driver_launch_matches_cupy_in_a_chain(pdl):
    # 50 dependent launches (each reads the y the one before wrote): with PDL, each waits on its griddepcontrol.wait
    import cupy

    n = 1 << 20
    fn = cupy.RawKernel(_SRC, "axpy", options=("-arch=sm_90",))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:  # every step on s, in order
        rng = cupy.random.default_rng(3)
        x = rng.standard_normal(n, dtype=cupy.float32) + 0.5
        y0 = rng.standard_normal(n, dtype=cupy.float32)
        want, got = y0.copy(), y0.copy()
        for _ in range(50):
            fn(((n + 255) // 256,), (256,), (x, want, cupy.int32(n), cupy.float32(0.75)))
        launch = dl.launcher(
            fn.kernel.ptr,
            ((n + 255) // 256, 1, 1),
            (256, 1, 1),
            0,
            "ppif",
            [x.data.ptr, got.data.ptr, n, 0.75],
            pdl=pdl,
        )
        for _ in range(50):
            launch(s.ptr)
        s.synchronize()
        assert not cupy.array_equal(want, y0) and cupy.array_equal(want, got)
