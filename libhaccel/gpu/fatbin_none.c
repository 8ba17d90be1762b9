// SPDX-License-Identifier: MIT
/* Built without nvcc: no kernels. The GPU runtime reports it (-ENOEXEC). */
#include "config.h"

#include "gpu/module.h"

const unsigned char haccel__fatbin[1] = { 0 };
const uint64_t haccel__fatbin_size = 0;
