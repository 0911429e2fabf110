#pragma once
// evo stand-in (a real cuBLASLt header wins): the names ATen/cuda's headers declare with, nothing callable.
#include <cublas_v2.h>
typedef struct cublasLtContext* cublasLtHandle_t;
