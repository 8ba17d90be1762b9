// SPDX-License-Identifier: MIT
/* Every kernel of haccel, in one translation unit: nvcc builds one fatbin. */
#include <cooperative_groups.h>

#include "kutil.cuh"

#include "common.cu"
#include "gemm.cu"
#include "kda.cu"
#include "dsa.cu"
