// engine_peer: the in-place fused add + RMSNorm an engine ships today, written here in the engines' style (vLLM's
// fused_add_rms_norm_kernel, FlashInfer's FusedAddRMSNormKernel: no code of theirs), made an evo family so that a
// campaign of ../ (the out-of-place tutorial kernel) times it beside its champion (peer.kernels in ../peer.yaml).
//
// For each token row of num_tokens rows of hidden_size elements, in place:
//   residual[row] = T(float(input[row]) + float(residual[row]))
//   input[row]    = T(float(residual[row]) * rsqrt(mean(float(residual[row])^2) + eps) * float(weight))
//
// One block per row, blockDim.x threads chosen at launch by the engine's heuristic (family.py, engine_block).

#include <cuda_bf16.h>

namespace engine {

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum over the block (whole warps), returned to every thread.
__device__ __forceinline__ float block_reduce_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? partial[lane] : 0.0f;
    s = warp_reduce_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

template <typename scalar_t>
__global__ void fused_add_rms_norm_kernel(scalar_t* __restrict__ input,         // [num_tokens, hidden_size], in-out
                                          scalar_t* __restrict__ residual,      // [num_tokens, hidden_size], in-out
                                          const scalar_t* __restrict__ weight,  // [hidden_size]
                                          const float epsilon, const int num_tokens, const int hidden_size) {
  const long row = (long)blockIdx.x * hidden_size;
  float variance = 0.0f;
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const scalar_t r = (scalar_t)((float)input[row + idx] + (float)residual[row + idx]);
    residual[row + idx] = r;
    const float x = (float)r;
    variance += x * x;
  }
  const float inv = rsqrtf(block_reduce_sum(variance) / (float)hidden_size + epsilon);
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    input[row + idx] = (scalar_t)((float)residual[row + idx] * inv * (float)weight[idx]);
  }
}

}  // namespace engine
