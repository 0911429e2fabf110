#pragma once
// evo stand-in (a real cuSOLVER header wins): the names ATen/cuda's headers declare with, nothing callable.
#include <cusolver_common.h>
typedef struct cusolverDnContext* cusolverDnHandle_t;
