// vllm_like: dtype dispatch for the extension's launchers (a fixture of evo, in the style of a torch extension's
// csrc/dispatch_utils.h). Each macro runs its lambda with `scalar_t` bound to the tensor's c10 scalar type.
#pragma once

#include <torch/all.h>

// The 16-bit float types the packed kernels take.
#define VLLM_LIKE_DISPATCH_CASE_HALF_TYPES(...)        \
  AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__) \
  AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__)

#define VLLM_LIKE_DISPATCH_HALF_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, VLLM_LIKE_DISPATCH_CASE_HALF_TYPES(__VA_ARGS__))

// float32 beside them, for kernels with a generic path.
#define VLLM_LIKE_DISPATCH_CASE_FLOATING_TYPES(...)     \
  AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__) \
  VLLM_LIKE_DISPATCH_CASE_HALF_TYPES(__VA_ARGS__)

#define VLLM_LIKE_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, VLLM_LIKE_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__))
