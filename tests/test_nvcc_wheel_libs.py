"""A CUDA library's header reached by an engine's headers (FlashInfer's norm.cuh reaches cublasLt.h and
curand_kernel.h) that the toolkit here lacks comes from the library's NVIDIA wheel installed in this environment
(harness/nvcc.py, wheel_library_include_dirs), with no include_dirs of the user's; a toolkit's own header wins.

The library and the engine header are written here in their style (a handle type, a device RNG step), not copied."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.nvcc as hn
from harness.build import BuildError
from harness.nvcc import NvccIncludes, compile_nvcc, find_nvcc, nvcc_version, wheel_library_include_dirs

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here (a CUDA toolkit or nvidia-cuda-nvcc)")

# A CUDA library's header, as its wheel ships it: a host handle type and a device function.
LIB_H = """\
#pragma once
typedef struct engineRandContext* engineRandHandle_t;
__device__ inline unsigned engine_rand_step(unsigned s) { return s * 1664525u + 1013904223u; }
"""

# An engine's header: its utilities include the library (for a host helper), its kernel uses the device part.
ENGINE_CUH = """\
#pragma once
#include <cuda_fp16.h>
#include <enginerand_kernel.h>
#include <vector>

namespace eng {
inline std::vector<engineRandHandle_t> handles;  // host-side use, as engines' utils headers have

template <int VEC>
__global__ void noise_kernel(float* __restrict__ x, unsigned seed, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += (float)(engine_rand_step(seed + i) & 0xff) * (1.0f / VEC);
}
}  // namespace eng
"""


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """An ``nvidia`` namespace folder holding the library's wheel headers for the nvcc here (and a cuda_fp16.h
    that must lose to the toolkit's)."""
    major = nvcc_version(find_nvcc()).split(".")[0] if find_nvcc() else "13"
    inc = tmp_path / "site" / "nvidia" / (f"cu{major}" if int(major) >= 13 else "curand") / "include"
    inc.mkdir(parents=True)
    (inc / "enginerand_kernel.h").write_text(LIB_H)
    (inc / "cuda_fp16.h").write_text("#error \"the wheel's cuda_fp16.h was taken over the toolkit's\"\n")
    monkeypatch.setattr(hn, "_nvidia_locations", lambda: [tmp_path / "site" / "nvidia"])
    wheel_library_include_dirs.cache_clear()
    yield inc
    wheel_library_include_dirs.cache_clear()


def _engine(tmp_path: Path) -> NvccIncludes:
    root = tmp_path / "engine" / "include"
    (root / "eng").mkdir(parents=True)
    (root / "eng" / "noise.cuh").write_text(ENGINE_CUH)
    return NvccIncludes((str(root),), str(tmp_path))


@needs_nvcc
def test_a_library_header_missing_from_the_toolkit_comes_from_its_wheel(tmp_path, wheels):
    src = '#include "eng/noise.cuh"\n'
    out = compile_nvcc(src, "eng::noise_kernel<4>", "sm_90", ("-std=c++17",), _engine(tmp_path))
    assert out.cubin and str(wheels / "enginerand_kernel.h") in out.deps


@needs_nvcc
def test_without_the_wheel_the_missing_header_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(hn, "_nvidia_locations", lambda: [])
    wheel_library_include_dirs.cache_clear()
    try:
        with pytest.raises(BuildError) as e:
            compile_nvcc('#include "eng/noise.cuh"\n', "eng::noise_kernel<4>", "sm_90", (), _engine(tmp_path))
    finally:
        wheel_library_include_dirs.cache_clear()
    assert "enginerand_kernel.h" in str(e.value) and "\n" not in str(e.value)


def test_cuda12_wheels_keep_one_folder_per_library(tmp_path, monkeypatch):
    site = tmp_path / "nvidia"
    for lib in ("cublas", "curand", "cu13"):
        (site / lib / "include").mkdir(parents=True)
    monkeypatch.setattr(hn, "_nvidia_locations", lambda: [site])
    wheel_library_include_dirs.cache_clear()
    try:
        assert wheel_library_include_dirs("12") == (str(site / "cublas/include"), str(site / "curand/include"))
        assert wheel_library_include_dirs("13") == (str(site / "cu13/include"),)
        assert wheel_library_include_dirs("") == wheel_library_include_dirs("12")
    finally:
        wheel_library_include_dirs.cache_clear()
