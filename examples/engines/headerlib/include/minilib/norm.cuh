// minilib: RMSNorm kernels and their host launchers, several in one header.
//
// A row of d elements per block; block = (32, num_warps), num_warps chosen by the host launcher from d (the kernels
// read it from blockDim.y). The fused kernel works in place: residual <- input + residual, input <- RMSNorm of it.
#ifndef MINILIB_NORM_CUH_
#define MINILIB_NORM_CUH_

#include <algorithm>
#include <cstdint>

#include "minilib/utils.cuh"
#include "minilib/vec.cuh"

namespace minilib {
namespace norm {

// Sum over the block of one value per thread. Each warp sums its lanes; then every thread adds the warp partials in
// warp order itself, so the total is the same bits in every thread and one barrier is enough.
__device__ __forceinline__ float block_sum(float v, float* partials) {
  v = warp_allreduce_sum(v);
  if (threadIdx.x == 0) partials[threadIdx.y] = v;
  __syncthreads();
  float total = 0.f;
  for (uint32_t w = 0; w < blockDim.y; ++w) total += partials[w];
  return total;
}

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// output[row] = input[row] * rsqrt(mean(input[row]^2) + eps) * (weight_bias + weight)
template <uint32_t VEC_SIZE, typename T>
__global__ void RMSNormKernel(T* __restrict__ input, T* __restrict__ weight, T* __restrict__ output,
                              const uint32_t d, const uint32_t stride_input, const uint32_t stride_output,
                              float weight_bias, float eps) {
  extern __shared__ float warp_partials[];
  const uint32_t row = blockIdx.x;
  const uint32_t thread_id = threadIdx.y * kWarpSize + threadIdx.x;
  const uint32_t num_threads = blockDim.y * kWarpSize;
  const uint32_t rounds = div_up(d, num_threads * VEC_SIZE);
  const T* x_row = input + row * stride_input;
  T* out_row = output + row * stride_output;

  wait_for_previous_grid();
  float sum_sq = 0.f;
  for (uint32_t i = 0; i < rounds; ++i) {
    const uint32_t col = (i * num_threads + thread_id) * VEC_SIZE;
    if (col < d) {
      vec_t<T, VEC_SIZE> xv;
      xv.load(x_row + col);
#pragma unroll
      for (uint32_t j = 0; j < VEC_SIZE; ++j) sum_sq += to_float(xv[j]) * to_float(xv[j]);
    }
  }
  const float rms_rcp = rsqrtf(block_sum(sum_sq, warp_partials) / float(d) + eps);

  for (uint32_t i = 0; i < rounds; ++i) {
    const uint32_t col = (i * num_threads + thread_id) * VEC_SIZE;
    if (col < d) {
      vec_t<T, VEC_SIZE> xv, wv;
      xv.load(x_row + col);
      wv.load(weight + col);
#pragma unroll
      for (uint32_t j = 0; j < VEC_SIZE; ++j) {
        xv[j] = from_float<T>(to_float(xv[j]) * rms_rcp * (weight_bias + to_float(wv[j])));
      }
      xv.store(out_row + col);
    }
  }
  allow_next_grid();
}

// In place: residual[row] <- r = T(input[row] + residual[row]) (added in float, rounded to T), then
// input[row] <- r * rsqrt(mean(r^2) + eps) * (weight_bias + weight). Pass 2 reads r back from residual: this very
// thread stored it in pass 1, so no barrier is needed between the passes beyond the reduction's.
template <uint32_t VEC_SIZE, typename T>
__global__ void FusedAddRMSNormKernel(T* __restrict__ input, T* __restrict__ residual, T* __restrict__ weight,
                                      const uint32_t d, const uint32_t stride_input, const uint32_t stride_residual,
                                      float weight_bias, float eps) {
  extern __shared__ float warp_partials[];
  const uint32_t row = blockIdx.x;
  const uint32_t thread_id = threadIdx.y * kWarpSize + threadIdx.x;
  const uint32_t num_threads = blockDim.y * kWarpSize;
  const uint32_t rounds = div_up(d, num_threads * VEC_SIZE);
  T* x_row = input + row * stride_input;
  T* r_row = residual + row * stride_residual;

  wait_for_previous_grid();
  float sum_sq = 0.f;
  for (uint32_t i = 0; i < rounds; ++i) {
    const uint32_t col = (i * num_threads + thread_id) * VEC_SIZE;
    if (col < d) {
      vec_t<T, VEC_SIZE> xv, rv;
      xv.load(x_row + col);
      rv.load(r_row + col);
#pragma unroll
      for (uint32_t j = 0; j < VEC_SIZE; ++j) {
        rv[j] = from_float<T>(to_float(xv[j]) + to_float(rv[j]));
        const float r = to_float(rv[j]);
        sum_sq += r * r;
      }
      rv.store(r_row + col);
    }
  }
  const float rms_rcp = rsqrtf(block_sum(sum_sq, warp_partials) / float(d) + eps);

  for (uint32_t i = 0; i < rounds; ++i) {
    const uint32_t col = (i * num_threads + thread_id) * VEC_SIZE;
    if (col < d) {
      vec_t<T, VEC_SIZE> rv, wv, ov;
      rv.load(r_row + col);
      wv.load(weight + col);
#pragma unroll
      for (uint32_t j = 0; j < VEC_SIZE; ++j) {
        ov[j] = from_float<T>(to_float(rv[j]) * rms_rcp * (weight_bias + to_float(wv[j])));
      }
      ov.store(x_row + col);
    }
  }
  allow_next_grid();
}

// The library's block shape: one vector per thread across the row, in whole warps, at most 1024 threads.
inline uint32_t NormNumWarps(uint32_t d, uint32_t vec_size) {
  const uint32_t threads = std::max<uint32_t>(1, std::min<uint32_t>(kMaxThreads, d / vec_size));
  return div_up(threads, kWarpSize);
}

template <typename T>
cudaError_t RMSNorm(T* input, T* weight, T* output, uint32_t batch_size, uint32_t d, uint32_t stride_input,
                    uint32_t stride_output, float eps = 1e-6f, bool enable_pdl = false, cudaStream_t stream = nullptr) {
  MINILIB_CHECK(d > 0 && batch_size > 0, "RMSNorm of ", batch_size, " rows of ", d);
  const uint32_t vec_size = vec_sizes_for<T>(d).front();
  const uint32_t num_warps = NormNumWarps(d, vec_size);
  const float weight_bias = 0.f;
  MINILIB_DISPATCH_VEC_SIZE(vec_size, VEC_SIZE, {
    return launch_kernel(RMSNormKernel<VEC_SIZE, T>, dim3(batch_size), dim3(kWarpSize, num_warps),
                         num_warps * sizeof(float), enable_pdl, stream, input, weight, output, d, stride_input,
                         stride_output, weight_bias, eps);
  });
  return cudaSuccess;
}

template <typename T>
cudaError_t FusedAddRMSNorm(T* input, T* residual, T* weight, uint32_t batch_size, uint32_t d,
                            uint32_t stride_input, uint32_t stride_residual, float eps = 1e-6f,
                            bool enable_pdl = false, cudaStream_t stream = nullptr) {
  MINILIB_CHECK(d > 0 && batch_size > 0, "FusedAddRMSNorm of ", batch_size, " rows of ", d);
  MINILIB_CHECK(stride_input >= d && stride_residual >= d, "row strides ", stride_input, ", ", stride_residual,
                " under d = ", d);
  const uint32_t vec_size = vec_sizes_for<T>(d).front();
  const uint32_t num_warps = NormNumWarps(d, vec_size);
  const float weight_bias = 0.f;
  MINILIB_DISPATCH_VEC_SIZE(vec_size, VEC_SIZE, {
    return launch_kernel(FusedAddRMSNormKernel<VEC_SIZE, T>, dim3(batch_size), dim3(kWarpSize, num_warps),
                         num_warps * sizeof(float), enable_pdl, stream, input, residual, weight, d, stride_input,
                         stride_residual, weight_bias, eps);
  });
  return cudaSuccess;
}

}  // namespace norm
}  // namespace minilib

#endif  // MINILIB_NORM_CUH_
