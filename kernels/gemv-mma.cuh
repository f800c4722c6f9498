// SPDX-License-Identifier: MIT
// The tensor-core decode GEMV (gemv-mma.cu), behind dcpk_gemv_on (gemv.cu). Arguments as
// dcpk_gemv's, already checked; BF16 weights need k_cols % 8 == 0.
#pragma once

#include <cuda_runtime.h>

#include "dcp-kernels.h"

int dcpk_gemv_mma (DcpkFormat format, const void *d_weight, int n_rows, int k_cols,
                   const float *d_x, int batch, float *d_y, cudaStream_t stream);
