/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda"

#include "config.h"

#include "dcp-cuda-error.h"
#include "dcp-kernels.h"

/* cudaErrorMemoryAllocation */
#define CUDA_ERROR_MEMORY_ALLOCATION 2

gboolean
dcp_cuda_check (int err, const char *what, GError **error)
{
  if (err == 0)
    return TRUE;
  g_set_error (error, DCP_ERROR,
               err == CUDA_ERROR_MEMORY_ALLOCATION ? DCP_ERROR_OUT_OF_MEMORY : DCP_ERROR_DEVICE,
               "CUDA: %s: %s (%s)", what, dcpk_error_name (err), dcpk_error_string (err));
  return FALSE;
}
