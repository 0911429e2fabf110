// mkcuda: the activation and norm kernels of the MLP block, several in one header (a fixture of evo, in the style
// of llama.cpp's ggml-cuda/ and SGLang's sgl-kernel). Device code only: NVRTC and nvcc both take it.
#pragma once

#include <cuda_bf16.h>

#include "common.cuh"

// ---------------------------------------------------------------------------------------------------------------
// gated activations: input [nrows, 2 * d] = [gate | up], out [nrows, d] = act(gate) * up, bf16, VEC per access

struct silu_op {
  static __device__ __forceinline__ float apply(float x) { return x / (1.0f + __expf(-x)); }
};

struct gelu_tanh_op {
  static __device__ __forceinline__ float apply(float x) {
    const float k0 = 0.7978845608f;  // sqrt(2 / pi)
    const float k1 = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
  }
};

template <typename Op, int VEC>
__device__ __forceinline__ void act_and_mul_row(__nv_bfloat16* __restrict__ out,
                                                const __nv_bfloat16* __restrict__ input, const int d) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* gate = input + row * 2 * d;
  const __nv_bfloat16* up = gate + d;
  __nv_bfloat16* dst = out + row * d;
  for (int col = threadIdx.x * VEC; col < d; col += blockDim.x * VEC) {
    __nv_bfloat16 g[VEC], u[VEC], o[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      g[k] = gate[col + k];
      u[k] = up[col + k];
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      o[k] = __float2bfloat16_rn(Op::apply(__bfloat162float(g[k])) * __bfloat162float(u[k]));
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) dst[col + k] = o[k];
  }
}

template <int VEC>
__global__ void silu_and_mul_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ input,
                                    const int d) {
  act_and_mul_row<silu_op, VEC>(out, input, d);
}

template <int VEC>
__global__ void gelu_tanh_and_mul_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ input,
                                         const int d) {
  act_and_mul_row<gelu_tanh_op, VEC>(out, input, d);
}

// ---------------------------------------------------------------------------------------------------------------
// RMSNorm times a broadcast multiplier, float32: dst[row] = x[row] * rsqrt(mean(x[row]^2) + eps) * mul[row % mul_nrows]
// One row per block of block_size threads. mul_nrows comes as fast-division constants, by value: a row of mul
// serves every mul_nrows-th row of x (1: one weight vector for all rows).

template <int block_size>
__global__ void rms_norm_mul_f32(const float* __restrict__ x, float* __restrict__ dst, const int ncols,
                                 const int64_t stride_row, const float eps, const float* __restrict__ mul,
                                 const int64_t mul_stride_row, const fastdiv_consts mul_nrows) {
  static_assert(block_size % MK_WARP_SIZE == 0 && block_size <= 1024, "block_size: whole warps, at most 1024");
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  x += row * stride_row;
  dst += int64_t(row) * ncols;
  mul += fastmodulo(row, mul_nrows) * mul_stride_row;

  float sum = 0.0f;
  for (int col = tid; col < ncols; col += block_size) {
    const float xi = x[col];
    sum += xi * xi;
  }
  sum = warp_reduce_sum(sum);
  if constexpr (block_size > MK_WARP_SIZE) {
    __shared__ float s_sum[32];
    const int warp_id = tid / MK_WARP_SIZE;
    const int lane_id = tid % MK_WARP_SIZE;
    if (lane_id == 0) s_sum[warp_id] = sum;
    __syncthreads();
    sum = lane_id < block_size / MK_WARP_SIZE ? s_sum[lane_id] : 0.0f;
    sum = warp_reduce_sum(sum);
  }
  const float scale = rsqrtf(sum / ncols + eps);

  for (int col = tid; col < ncols; col += block_size) {
    dst[col] = scale * x[col] * mul[col];
  }
}
