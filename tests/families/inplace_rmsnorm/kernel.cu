// inplace_rmsnorm: a test fixture of ours, written in the style of the engines' fused add + RMSNorm (vLLM's
// fused_add_rms_norm_kernel, FlashInfer's FusedAddRMSNormKernel): it works in place, as they do.
//
// For each token row of num_tokens rows of hidden_size elements:
//   residual[row] = T(float(input[row]) + float(residual[row]))          (the sum, over the residual)
//   input[row]    = T(float(residual[row]) * rsqrt(mean(sum^2) + eps) * float(weight))   (over the input)
//
// One block per row; the block size is whatever the launch gives (blockDim.x, a multiple of 32 up to 1024),
// chosen at launch as the engines choose it.

#include <cuda_bf16.h>

namespace inplace {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x threads, whole warps), returned to every thread.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? partial[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

template <typename scalar_t>
__global__ void fused_add_rms_norm_kernel(scalar_t* __restrict__ input,     // [num_tokens, hidden_size], in-out
                                          scalar_t* __restrict__ residual,  // [num_tokens, hidden_size], in-out
                                          const scalar_t* __restrict__ weight,  // [hidden_size]
                                          const float epsilon, const int num_tokens, const int hidden_size) {
  const long row = (long)blockIdx.x * hidden_size;
  float variance = 0.0f;
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float z = (float)input[row + idx] + (float)residual[row + idx];
    const scalar_t r = (scalar_t)z;
    residual[row + idx] = r;
    const float x = (float)r;
    variance += x * x;
  }
  const float inv = rsqrtf(block_sum(variance) / (float)hidden_size + epsilon);
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = (float)residual[row + idx];
    input[row + idx] = (scalar_t)(x * inv * (float)weight[idx]);
  }
}

}  // namespace inplace
