// vllm_like: fused residual add + RMSNorm as a torch extension's .cu (a fixture of evo, written in the style of
// vLLM's csrc/layernorm_kernels.cu). The kernel works in place (residual <- input + residual, input <- the
// normalized sum), reads its block size from blockDim.x (the launcher picks it from the batch), and is vectorized by
// its `width` template parameter; a generic scalar path serves width 0 and types without packed math.
#include "dispatch_utils.h"

#include <torch/all.h>
#include <torch/cuda.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace vllm_like {

// The CUDA pair type of a c10 16-bit float, with float2 conversions (the packed intrinsics, not c10's operators).
template <typename scalar_t>
struct PackedMath {
  static constexpr bool exists = false;
};

template <>
struct PackedMath<c10::BFloat16> {
  static constexpr bool exists = true;
  using pair_t = __nv_bfloat162;
  __device__ static float2 to_float2(pair_t p) { return __bfloat1622float2(p); }
  __device__ static pair_t from_float2(float2 f) { return __float22bfloat162_rn(f); }
};

template <>
struct PackedMath<c10::Half> {
  static constexpr bool exists = true;
  using pair_t = __half2;
  __device__ static float2 to_float2(pair_t p) { return __half22float2(p); }
  __device__ static pair_t from_float2(float2 f) { return __float22half2_rn(f); }
};

// `width` elements moved as one access (16 bytes at width 8).
template <typename scalar_t, int width>
struct alignas(sizeof(scalar_t) * width) PackedVec {
  typename PackedMath<scalar_t>::pair_t pairs[width / 2];
};

// The block's sum, valid in thread 0, for a blockDim.x that is a multiple of 32 (at most 1024).
__device__ __forceinline__ float block_reduce_sum(float v) {
  __shared__ float warp_totals[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  v = 0.f;
  if (warp == 0) {
    v = lane < int(blockDim.x / 32) ? warp_totals[lane] : 0.f;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Packed path: hidden_size and input_stride are multiples of width, every pointer aligned to width elements.
template <typename scalar_t, int width>
__global__ std::enable_if_t<(width > 0) && PackedMath<scalar_t>::exists> fused_add_rms_norm_kernel(
    scalar_t* __restrict__ input,         // [num_tokens, hidden_size], rows input_stride apart
    scalar_t* __restrict__ residual,      // [num_tokens, hidden_size], contiguous
    const scalar_t* __restrict__ weight,  // [hidden_size]
    const int64_t input_stride, const float epsilon, const int hidden_size) {
  static_assert(width % 2 == 0, "the packed path moves whole pairs");
  using Math = PackedMath<scalar_t>;
  using Vec = PackedVec<scalar_t, width>;
  __shared__ float s_inv_rms;
  const int num_vecs = hidden_size / width;
  Vec* __restrict__ in_v = reinterpret_cast<Vec*>(input + blockIdx.x * input_stride);
  Vec* __restrict__ res_v = reinterpret_cast<Vec*>(residual + int64_t(blockIdx.x) * hidden_size);
  const Vec* __restrict__ w_v = reinterpret_cast<const Vec*>(weight);

  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < num_vecs; i += blockDim.x) {
    const Vec x = in_v[i];
    Vec r = res_v[i];
#pragma unroll
    for (int k = 0; k < width / 2; ++k) {
      const float2 a = Math::to_float2(x.pairs[k]);
      const float2 b = Math::to_float2(r.pairs[k]);
      r.pairs[k] = Math::from_float2(make_float2(a.x + b.x, a.y + b.y));
      const float2 s = Math::to_float2(r.pairs[k]);  // the rounded sum, as stored, is what gets normalized
      sum_sq += s.x * s.x + s.y * s.y;
    }
    res_v[i] = r;
  }
  sum_sq = block_reduce_sum(sum_sq);
  if (threadIdx.x == 0) s_inv_rms = rsqrtf(sum_sq / hidden_size + epsilon);
  __syncthreads();
  const float inv_rms = s_inv_rms;

  for (int i = threadIdx.x; i < num_vecs; i += blockDim.x) {
    const Vec r = res_v[i];  // written by this very thread above
    const Vec w = w_v[i];
    Vec out;
#pragma unroll
    for (int k = 0; k < width / 2; ++k) {
      const float2 s = Math::to_float2(r.pairs[k]);
      const float2 g = Math::to_float2(w.pairs[k]);
      out.pairs[k] = Math::from_float2(make_float2(s.x * inv_rms * g.x, s.y * inv_rms * g.y));
    }
    in_v[i] = out;
  }
}

// Generic path: any hidden_size and alignment, any type (width is unused, kept for one launch macro).
template <typename scalar_t, int width>
__global__ std::enable_if_t<(width == 0) || !PackedMath<scalar_t>::exists> fused_add_rms_norm_kernel(
    scalar_t* __restrict__ input, scalar_t* __restrict__ residual, const scalar_t* __restrict__ weight,
    const int64_t input_stride, const float epsilon, const int hidden_size) {
  __shared__ float s_inv_rms;
  scalar_t* in_row = input + blockIdx.x * input_stride;
  scalar_t* res_row = residual + int64_t(blockIdx.x) * hidden_size;

  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    const scalar_t r = scalar_t(static_cast<float>(in_row[i]) + static_cast<float>(res_row[i]));
    const float s = static_cast<float>(r);
    sum_sq += s * s;
    res_row[i] = r;
  }
  sum_sq = block_reduce_sum(sum_sq);
  if (threadIdx.x == 0) s_inv_rms = rsqrtf(sum_sq / hidden_size + epsilon);
  __syncthreads();
  const float inv_rms = s_inv_rms;

  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    in_row[i] = scalar_t(static_cast<float>(res_row[i]) * inv_rms * static_cast<float>(weight[i]));
  }
}

// Threads a row gets: one packed vector each, whole warps, 1024 at most for a few tokens (each row's block must hide
// the memory latency alone), 256 for many (more blocks resident per SM).
inline int fused_add_rms_norm_block_size(int num_tokens, int hidden_size, int width) {
  const int per_row = width > 0 ? hidden_size / width : hidden_size;
  const int max_threads = num_tokens <= 64 ? 1024 : 256;
  return std::min((per_row + 31) / 32 * 32, max_threads);
}

}  // namespace vllm_like

#define VLLM_LIKE_LAUNCH_FUSED_ADD_RMS_NORM(WIDTH)                                                            \
  VLLM_LIKE_DISPATCH_HALF_TYPES(input.scalar_type(), "fused_add_rms_norm_kernel", [&] {                       \
    dim3 block(vllm_like::fused_add_rms_norm_block_size(num_tokens, hidden_size, WIDTH));                     \
    vllm_like::fused_add_rms_norm_kernel<scalar_t, WIDTH><<<grid, block, 0, stream>>>(                        \
        input.data_ptr<scalar_t>(), residual.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(), input_stride, \
        static_cast<float>(epsilon), hidden_size);                                                            \
  });

void fused_add_rms_norm(torch::Tensor& input,     // [..., hidden_size], normalized in place
                        torch::Tensor& residual,  // [..., hidden_size], becomes input + residual
                        torch::Tensor& weight,    // [hidden_size]
                        double epsilon) {
  TORCH_CHECK(input.stride(-1) == 1, "fused_add_rms_norm: input rows must be contiguous");
  TORCH_CHECK(residual.is_contiguous() && weight.is_contiguous(), "fused_add_rms_norm: residual, weight contiguous");
  TORCH_CHECK(input.scalar_type() == residual.scalar_type() && input.scalar_type() == weight.scalar_type());
  const int hidden_size = input.size(-1);
  const int64_t input_stride = input.dim() > 1 ? input.stride(-2) : hidden_size;
  const int num_tokens = input.numel() / hidden_size;
  if (num_tokens == 0) return;

  // 16-byte accesses when every pointer and row start allows them; the generic path otherwise.
  constexpr int kWidth = 8;
  const auto aligned = [](const torch::Tensor& t) {
    return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % (kWidth * t.element_size()) == 0;
  };
  const bool packed = aligned(input) && aligned(residual) && aligned(weight) && hidden_size % kWidth == 0 &&
                      input_stride % kWidth == 0;

  dim3 grid(num_tokens);
  const at::cuda::OptionalCUDAGuard device_guard(device_of(input));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (packed) {
    VLLM_LIKE_LAUNCH_FUSED_ADD_RMS_NORM(kWidth);
  } else {
    VLLM_LIKE_LAUNCH_FUSED_ADD_RMS_NORM(0);
  }
}
