#pragma once
// evo stand-in (a real cuSOLVER header wins): the names ATen/cuda's headers declare with, nothing callable.
typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;
