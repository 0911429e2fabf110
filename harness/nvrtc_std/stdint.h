// evo: <stdint.h> under NVRTC (see cstdint beside this file).
#pragma once
#include <cstdint>
