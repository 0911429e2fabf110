#pragma once
// evo stand-in (a real cuSPARSE header wins): the names ATen/cuda's headers declare with, nothing callable.
typedef struct cusparseContext* cusparseHandle_t;
typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;
