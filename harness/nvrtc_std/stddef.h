// evo: <stddef.h> under NVRTC (see cstddef beside this file).
#pragma once
#include <cstddef>
