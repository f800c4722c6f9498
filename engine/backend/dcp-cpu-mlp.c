/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-mlp"

#include "config.h"

#include "dcp-cpu-mlp.h"

void
dcp_cpu_mlp_forward (DcpCpuPool *pool, const DcpCpuLayer *layer, const float *h, guint n_tokens,
                     float *out)
{
  gsize n = (gsize) n_tokens * layer->gate.rows;
  g_autofree float *gate = g_new (float, n);
  g_autofree float *up = g_new (float, n);

  dcp_cpu_matmul (pool, &layer->gate, h, n_tokens, gate);
  dcp_cpu_matmul (pool, &layer->up, h, n_tokens, up);
  for (gsize i = 0; i < n; i++)
    gate[i] = dcp_cpu_silu (gate[i]) * up[i];
  dcp_cpu_matmul (pool, &layer->down, gate, n_tokens, out);
}
