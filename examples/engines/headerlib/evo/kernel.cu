#include <minilib/norm.cuh>
