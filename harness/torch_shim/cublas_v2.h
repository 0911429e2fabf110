#pragma once
// evo stand-in (a real cuBLAS header wins): the names ATen/cuda's headers declare with, nothing callable.
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
