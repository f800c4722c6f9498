/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-weights.h"

G_BEGIN_DECLS

/* The KV cache of one full-attention layer for one sequence: post-norm, post-RoPE keys and the
 * values, FP32, [n_tokens, n_kv_heads * head_dim] each; it grows as tokens arrive. */
typedef struct {
  guint n_tokens, capacity;
  guint width;
  float *k, *v;
} DcpCpuKvCache;

void dcp_cpu_kv_cache_init  (DcpCpuKvCache       *cache,
                             guint                width);
void dcp_cpu_kv_cache_clear (DcpCpuKvCache       *cache);
void dcp_cpu_kv_cache_copy  (DcpCpuKvCache       *dst,
                             const DcpCpuKvCache *src);

/* Gated full attention (../shared/MODEL.md §2.2) of n_tokens normed hidden states h
 * [n_tokens, hidden] at positions cache->n_tokens ...; appends their keys and values to the
 * cache and writes the layer's output (after o_proj) to out [n_tokens, hidden]. */
void dcp_cpu_attention_forward (DcpCpuPool                   *pool,
                                const DcpModelConfig         *config,
                                const DcpCpuAttentionWeights *w,
                                DcpCpuKvCache                *cache,
                                const float                  *h,
                                guint                         n_tokens,
                                float                        *out);

G_END_DECLS
