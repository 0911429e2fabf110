// minilib: a header-only kernel library (a fixture of evo, written in the style of FlashInfer's headers).
// Host C++ lives beside the device code, as in such libraries: error checks that throw, a launcher that
// sets launch attributes, dispatch macros turning a run-time size into a template argument.
#ifndef MINILIB_UTILS_CUH_
#define MINILIB_UTILS_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <vector>

#define MINILIB_STR_(x) #x
#define MINILIB_STR(x) MINILIB_STR_(x)

// Throws on the host: the library's callers (a Python binding) turn it into an exception of theirs.
#define MINILIB_CHECK(cond, ...)                                                    \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::ostringstream minilib_msg_;                                              \
      minilib_msg_ << __FILE__ << ":" << __LINE__ << ": check " #cond " failed: "; \
      ::minilib::detail::stream_all(minilib_msg_, __VA_ARGS__);                     \
      throw std::runtime_error(minilib_msg_.str());                                 \
    }                                                                               \
  } while (0)

#define MINILIB_CUDA_CALL(expr)                                                          \
  do {                                                                                   \
    cudaError_t minilib_err_ = (expr);                                                   \
    if (minilib_err_ != cudaSuccess) {                                                   \
      std::cerr << "minilib: " << cudaGetErrorString(minilib_err_) << " at " << __FILE__ \
                << ":" << __LINE__ << " (" MINILIB_STR(expr) ")" << std::endl;           \
      return minilib_err_;                                                               \
    }                                                                                    \
  } while (0)

// A run-time vector width (elements a thread loads at once) as a compile-time constant.
#define MINILIB_DISPATCH_VEC_SIZE(vec_size, VEC_SIZE, ...)                  \
  switch (vec_size) {                                                       \
    case 8: {                                                               \
      constexpr uint32_t VEC_SIZE = 8;                                      \
      __VA_ARGS__ break;                                                    \
    }                                                                       \
    case 4: {                                                               \
      constexpr uint32_t VEC_SIZE = 4;                                      \
      __VA_ARGS__ break;                                                    \
    }                                                                       \
    case 2: {                                                               \
      constexpr uint32_t VEC_SIZE = 2;                                      \
      __VA_ARGS__ break;                                                    \
    }                                                                       \
    case 1: {                                                               \
      constexpr uint32_t VEC_SIZE = 1;                                      \
      __VA_ARGS__ break;                                                    \
    }                                                                       \
    default:                                                                \
      MINILIB_CHECK(false, "vector width ", vec_size, " is not 1, 2, 4 or 8"); \
  }

namespace minilib {

namespace detail {
inline void stream_all(std::ostream&) {}
template <typename A, typename... Rest>
void stream_all(std::ostream& os, const A& a, const Rest&... rest) {
  os << a;
  stream_all(os, rest...);
}
}  // namespace detail

constexpr uint32_t kWarpSize = 32;
constexpr uint32_t kMaxThreads = 1024;

// Host-only constexpr functions called from kernels too: the library builds with --expt-relaxed-constexpr.
template <typename T>
constexpr T div_up(T a, T b) {
  return (a + b - 1) / b;
}

template <typename T>
constexpr T round_up(T a, T b) {
  return div_up(a, b) * b;
}

__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (uint32_t lane_mask = kWarpSize / 2; lane_mask >= 1; lane_mask >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, lane_mask);
  }
  return v;
}

// Launch through cudaLaunchKernelEx so that callers may ask for programmatic dependent launch (PDL).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, bool enable_pdl,
                          cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attrs[1];
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = enable_pdl ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 1;
  if (smem_bytes > 48 * 1024) {
    MINILIB_CUDA_CALL(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes)));
  }
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// The vector widths a row of d elements of T can be read with, widest first (16-byte loads at most).
template <typename T>
std::vector<uint32_t> vec_sizes_for(uint32_t d) {
  std::vector<uint32_t> sizes;
  for (uint32_t v = 16 / sizeof(T); v >= 1; v /= 2) {
    if (d % v == 0) sizes.push_back(v);
  }
  return sizes;
}

}  // namespace minilib

#endif  // MINILIB_UTILS_CUH_
