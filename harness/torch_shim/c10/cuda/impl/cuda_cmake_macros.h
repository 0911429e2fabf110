#pragma once
// evo stand-in: CMake generates this header for a CUDA build of torch; a CPU-only torch ships c10/cuda without it.
// torch's wheels are built as shared libraries.
#define C10_CUDA_BUILD_SHARED_LIBS
