/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-weights.h"

G_BEGIN_DECLS

/* SwiGLU: out = (silu(h W_gate^T) * (h W_up^T)) W_down^T for n_tokens rows of h. */
void dcp_cpu_mlp_forward (DcpCpuPool         *pool,
                          const DcpCpuLayer  *layer,
                          const float        *h,
                          guint               n_tokens,
                          float              *out);

G_END_DECLS
