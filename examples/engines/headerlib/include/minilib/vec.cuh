// minilib: vec_t<T, N>, N elements of T moved with one load or store (up to 16 bytes).
#ifndef MINILIB_VEC_CUH_
#define MINILIB_VEC_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace minilib {

// Element <-> float conversions, one overload set per storage type.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

template <typename T, uint32_t N>
struct alignas(sizeof(T) * N <= 16 ? sizeof(T) * N : 16) vec_t {
  static_assert((N & (N - 1)) == 0, "vec_t: N is a power of two");
  T data[N];

  __device__ __forceinline__ T& operator[](uint32_t i) { return data[i]; }
  __device__ __forceinline__ const T& operator[](uint32_t i) const { return data[i]; }

  __device__ __forceinline__ void fill(T value) {
#pragma unroll
    for (uint32_t i = 0; i < N; ++i) data[i] = value;
  }
  // ptr must be aligned to the vector (callers pick N from the row's width).
  __device__ __forceinline__ void load(const T* ptr) { *this = *reinterpret_cast<const vec_t*>(ptr); }
  __device__ __forceinline__ void store(T* ptr) const { *reinterpret_cast<vec_t*>(ptr) = *this; }
};

}  // namespace minilib

#endif  // MINILIB_VEC_CUH_
