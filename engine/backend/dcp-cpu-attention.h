/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-weights.h"

G_BEGIN_DECLS

/* The KV cache of one full-attention layer for one sequence: post-norm, post-RoPE keys and the
 * values, FP32, n_kv_heads * head_dim wide. Either in the cache's own growing arrays
 * [n_tokens, width], or (paged: pool_k != NULL) in a pool shared by many sequences, where row t
 * is slot t % page_tokens of page pages[t / page_tokens], each page page_tokens rows of K in
 * pool_k and of V in pool_v. The page table is borrowed from the sequence's state and must
 * cover every row written. */
typedef struct {
  guint n_tokens, capacity;
  guint width;
  float *k, *v;
  float *pool_k, *pool_v;
  guint page_tokens;
  const guint32 *pages;
  guint n_pages;
} DcpCpuKvCache;

static inline float *
dcp_cpu_kv_cache_row (const DcpCpuKvCache *c, gboolean value, guint t)
{
  if (c->pool_k == NULL)
    return (value ? c->v : c->k) + (gsize) t * c->width;
  return (value ? c->pool_v : c->pool_k) +
         ((gsize) c->pages[t / c->page_tokens] * c->page_tokens + t % c->page_tokens) * c->width;
}

void dcp_cpu_kv_cache_init  (DcpCpuKvCache       *cache,
                             guint                width);
void dcp_cpu_kv_cache_clear (DcpCpuKvCache       *cache);
/* dst's rows and count become src's; rows that already are the same memory (pages shared
 * between two paged caches) are not copied. A paged dst's table must cover src's rows. */
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
