/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-error.h"

G_BEGIN_DECLS

/* A kernel launcher's result (a cudaError_t as int, 0 = success) as a GError:
 * DCP_ERROR_OUT_OF_MEMORY for an allocation failure, DCP_ERROR_DEVICE otherwise, the message
 * naming what failed and the CUDA error. Returns whether err was 0. */
gboolean dcp_cuda_check (int          err,
                         const char  *what,
                         GError     **error);

G_END_DECLS
