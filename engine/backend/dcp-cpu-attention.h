/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-weights.h"

G_BEGIN_DECLS

/* The KV cache of one full-attention layer for one sequence: post-norm, post-RoPE keys and the
 * values, FP32, n_kv_heads * head_dim wide. With k_format / v_format other than F32, each new
 * row is rounded through that format first (BF16, or an MX format in blocks of 32 along each
 * head: the values a quantized cache of that format holds) and kept in FP32. Either in the cache's own growing arrays
 * [n_tokens, width], or (paged: pool_k != NULL) in a pool shared by many sequences, where row t
 * is slot t % page_tokens of page pages[t / page_tokens], each page page_tokens rows of K in
 * pool_k and of V in pool_v. The page table is borrowed from the sequence's state and must
 * cover every row written. */
typedef struct {
  guint n_tokens, capacity;
  guint width;
  guint head_dim;
  DcpDType k_format, v_format;
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
/* The formats new rows are rounded through (F32: none); head_dim divides the width. */
void dcp_cpu_kv_cache_set_formats (DcpCpuKvCache *cache,
                                   guint          head_dim,
                                   DcpDType       k_format,
                                   DcpDType       v_format);
/* Rounds n heads of head_dim values in place through format (F32: unchanged). */
void dcp_cpu_kv_round       (DcpDType             format,
                             float               *x,
                             guint                n_heads,
                             guint                head_dim);
/* dst's rows and count become src's (its formats stay); rows that already are the same memory (pages shared
 * between two paged caches) are not copied. A paged dst's table must cover src's rows. */
void dcp_cpu_kv_cache_copy  (DcpCpuKvCache       *dst,
                             const DcpCpuKvCache *src);

/* Gated full attention (docs/MODEL.md §2.2) of n_tokens normed hidden states h
 * [n_tokens, hidden], appended to the cache at rows cache->n_tokens ..., rotated by rope at
 * their mRoPE positions (3 x n_tokens: the T row, the H row, the W row); appends their keys and
 * values to the cache and writes the layer's output (after o_proj) to out [n_tokens, hidden]. */
void dcp_cpu_attention_forward (DcpCpuPool *pool, const DcpModelConfig *config, const DcpRope *rope,
                                const DcpCpuAttentionWeights *w, DcpCpuKvCache *cache,
                                const guint32 *positions, const float *h, guint n_tokens,
                                float *out);

G_END_DECLS
