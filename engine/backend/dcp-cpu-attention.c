/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-attention"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cpu-attention.h"
#include "dcp-float16.h"
#include "dcp-quant.h"

void
dcp_cpu_kv_cache_init (DcpCpuKvCache *cache, guint width)
{
  memset (cache, 0, sizeof *cache);
  cache->width = width;
  cache->head_dim = width;
  cache->k_format = cache->v_format = DCP_DTYPE_F32;
}

void
dcp_cpu_kv_cache_set_formats (DcpCpuKvCache *cache, guint head_dim, DcpDType k_format, DcpDType v_format)
{
  g_return_if_fail (head_dim > 0 && cache->width % head_dim == 0);
  cache->head_dim = head_dim;
  cache->k_format = k_format;
  cache->v_format = v_format;
}

void
dcp_cpu_kv_round (DcpDType format, float *x, guint n_heads, guint head_dim)
{
  gsize n = (gsize) n_heads * head_dim;

  if (format == DCP_DTYPE_F32)
    return;
  if (format == DCP_DTYPE_BF16)
    {
      for (gsize i = 0; i < n; i++)
        x[i] = dcp_bf16_to_f32 (dcp_f32_to_bf16 (x[i]));
      return;
    }
  {
    g_autofree guint8 *q = g_malloc (dcp_quant_tensor_bytes (format, n_heads, head_dim));

    dcp_quantize (format, x, n_heads, head_dim, q);
    dcp_dequantize_rows (format, q, n_heads, head_dim, 0, n_heads, x);
  }
}

void
dcp_cpu_kv_cache_clear (DcpCpuKvCache *cache)
{
  g_clear_pointer (&cache->k, g_free);
  g_clear_pointer (&cache->v, g_free);
  cache->n_tokens = cache->capacity = 0;
}

static void
reserve (DcpCpuKvCache *cache, guint n_tokens)
{
  if (cache->pool_k != NULL)
    {
      g_assert ((guint64) cache->n_pages * cache->page_tokens >= n_tokens);
      return;
    }
  if (n_tokens <= cache->capacity)
    return;
  cache->capacity = MAX (n_tokens, MAX (64, 2 * cache->capacity));
  cache->k = g_renew (float, cache->k, (gsize) cache->capacity * cache->width);
  cache->v = g_renew (float, cache->v, (gsize) cache->capacity * cache->width);
}

void
dcp_cpu_kv_cache_copy (DcpCpuKvCache *dst, const DcpCpuKvCache *src)
{
  g_assert (dst->width == src->width);
  reserve (dst, src->n_tokens);
  if (dst->pool_k == NULL && src->pool_k == NULL)
    {
      gsize n = (gsize) src->n_tokens * src->width;

      if (n > 0)
        {
          memcpy (dst->k, src->k, n * sizeof (float));
          memcpy (dst->v, src->v, n * sizeof (float));
        }
    }
  else
    for (guint t = 0; t < src->n_tokens; t++)
      for (int value = 0; value < 2; value++)
        {
          float *d = dcp_cpu_kv_cache_row (dst, value, t);
          const float *s = dcp_cpu_kv_cache_row (src, value, t);

          if (d != s)
            memcpy (d, s, src->width * sizeof (float));
        }
  dst->n_tokens = src->n_tokens;
}

typedef struct {
  const DcpModelConfig *config;
  const DcpCpuKvCache *cache;
  const float *qg;        /* [n_tokens, n_heads, 2 * head_dim]: query | gate per head */
  guint first_pos, n_tokens;
  float *attn;            /* [n_tokens, n_heads * head_dim], gated */
} AttendJob;

/* One (token, head) pair per index: causal softmax over the cache, then the sigmoid gate. */
static void
attend_range (gpointer data, guint begin, guint end)
{
  AttendJob *job = data;
  const DcpModelConfig *c = job->config;
  guint hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
  float scale = 1.0f / sqrtf ((float) hd);
  g_autofree float *scores = g_new (float, job->first_pos + job->n_tokens);

  for (guint i = begin; i < end; i++)
    {
      guint t = i / c->n_heads, head = i % c->n_heads, kv = head / group;
      guint n_keys = job->first_pos + t + 1;
      const float *q = job->qg + ((gsize) t * c->n_heads + head) * 2 * hd;
      const float *gate = q + hd;
      float *o = job->attn + ((gsize) t * c->n_heads + head) * hd;
      float max = -INFINITY, sum = 0;

      for (guint j = 0; j < n_keys; j++)
        {
          scores[j] = dcp_cpu_dot (q, dcp_cpu_kv_cache_row (job->cache, FALSE, j) + kv * hd, hd) * scale;
          max = MAX (max, scores[j]);
        }
      for (guint j = 0; j < n_keys; j++)
        {
          scores[j] = expf (scores[j] - max);
          sum += scores[j];
        }
      memset (o, 0, hd * sizeof (float));
      for (guint j = 0; j < n_keys; j++)
        {
          const float *v = dcp_cpu_kv_cache_row (job->cache, TRUE, j) + kv * hd;
          float p = scores[j] / sum;

          dcp_cpu_axpy (o, p, v, hd);
        }
      for (guint d = 0; d < hd; d++)
        o[d] *= dcp_cpu_sigmoid (gate[d]);
    }
}

void
dcp_cpu_attention_forward (DcpCpuPool *pool, const DcpModelConfig *c, const DcpRope *rope,
                           const DcpCpuAttentionWeights *w, DcpCpuKvCache *cache,
                           const guint32 *positions, const float *h, guint n_tokens, float *out)
{
  guint hd = c->head_dim, kvw = c->n_kv_heads * hd;
  float eps = (float) c->rms_norm_eps;
  g_autofree float *qg = g_new (float, (gsize) n_tokens * c->n_heads * 2 * hd);
  g_autofree float *k = g_new (float, (gsize) n_tokens * kvw);
  g_autofree float *v = g_new (float, (gsize) n_tokens * kvw);
  g_autofree float *attn = g_new (float, (gsize) n_tokens * c->n_heads * hd);
  guint first_pos = cache->n_tokens;
  AttendJob job = { c, cache, qg, first_pos, n_tokens, attn };

  dcp_cpu_matmul (pool, &w->q, h, n_tokens, qg);
  dcp_cpu_matmul (pool, &w->k, h, n_tokens, k);
  dcp_cpu_matmul (pool, &w->v, h, n_tokens, v);

  /* Per-head zero-centred RMSNorm, then RoPE over the rotary dims, of queries and keys. */
  for (guint t = 0; t < n_tokens; t++)
    {
      const guint32 pos[3] = { positions[t], positions[n_tokens + t], positions[2 * n_tokens + t] };

      for (guint head = 0; head < c->n_heads; head++)
        {
          float *q = qg + ((gsize) t * c->n_heads + head) * 2 * hd;

          dcp_cpu_rms_norm_zc (q, w->q_norm, hd, eps, q);
          dcp_cpu_rope_3d (q, rope, c->mrope_section, pos);
        }
      for (guint kv = 0; kv < c->n_kv_heads; kv++)
        {
          float *kh = k + (gsize) t * kvw + kv * hd;

          dcp_cpu_rms_norm_zc (kh, w->k_norm, hd, eps, kh);
          dcp_cpu_rope_3d (kh, rope, c->mrope_section, pos);
        }
    }

  reserve (cache, first_pos + n_tokens);
  for (guint t = 0; t < n_tokens; t++)
    {
      dcp_cpu_kv_round (cache->k_format, k + (gsize) t * kvw, kvw / cache->head_dim, cache->head_dim);
      dcp_cpu_kv_round (cache->v_format, v + (gsize) t * kvw, kvw / cache->head_dim, cache->head_dim);
      memcpy (dcp_cpu_kv_cache_row (cache, FALSE, first_pos + t), k + (gsize) t * kvw, kvw * sizeof (float));
      memcpy (dcp_cpu_kv_cache_row (cache, TRUE, first_pos + t), v + (gsize) t * kvw, kvw * sizeof (float));
    }
  cache->n_tokens += n_tokens;

  dcp_cpu_pool_run (pool, n_tokens * c->n_heads, attend_range, &job);
  dcp_cpu_matmul (pool, &w->o, attn, n_tokens, out);
}
