/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-gdn"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cpu-gdn.h"

void
dcp_cpu_gdn_state_init (DcpCpuGdnState *s, const DcpModelConfig *c)
{
  s->n_value_heads = c->linear_n_value_heads;
  s->key_dim = c->linear_key_head_dim;
  s->value_dim = c->linear_value_head_dim;
  s->conv_dim = 2 * c->linear_n_key_heads * c->linear_key_head_dim +
                c->linear_n_value_heads * c->linear_value_head_dim;
  s->conv_width = c->linear_conv_kernel - 1;
  s->conv = g_new0 (float, (gsize) s->conv_dim * s->conv_width);
  s->state = g_new0 (float, (gsize) s->n_value_heads * s->key_dim * s->value_dim);
}

void
dcp_cpu_gdn_state_clear (DcpCpuGdnState *s)
{
  g_clear_pointer (&s->conv, g_free);
  g_clear_pointer (&s->state, g_free);
}

void
dcp_cpu_gdn_state_copy (DcpCpuGdnState *dst, const DcpCpuGdnState *src)
{
  g_assert (dst->conv_dim == src->conv_dim && dst->n_value_heads == src->n_value_heads);
  memcpy (dst->conv, src->conv, (gsize) src->conv_dim * src->conv_width * sizeof (float));
  memcpy (dst->state, src->state,
          (gsize) src->n_value_heads * src->key_dim * src->value_dim * sizeof (float));
}

void
dcp_cpu_gdn_save_init (DcpCpuGdnSave *save, const DcpModelConfig *c, guint max_rows)
{
  guint value_width = c->linear_n_value_heads * c->linear_value_head_dim;

  dcp_cpu_gdn_state_init (&save->before, c);
  save->max_rows = max_rows;
  save->key_width = c->linear_n_key_heads * c->linear_key_head_dim;
  save->mixed = g_new (float, (gsize) max_rows * save->before.conv_dim);
  save->q = g_new (float, (gsize) max_rows * save->key_width);
  save->k = g_new (float, (gsize) max_rows * save->key_width);
  save->v = g_new (float, (gsize) max_rows *value_width);
  save->beta = g_new (float, (gsize) max_rows * c->linear_n_value_heads);
  save->g = g_new (float, (gsize) max_rows * c->linear_n_value_heads);
}

void
dcp_cpu_gdn_save_clear (DcpCpuGdnSave *save)
{
  dcp_cpu_gdn_state_clear (&save->before);
  g_clear_pointer (&save->mixed, g_free);
  g_clear_pointer (&save->q, g_free);
  g_clear_pointer (&save->k, g_free);
  g_clear_pointer (&save->v, g_free);
  g_clear_pointer (&save->beta, g_free);
  g_clear_pointer (&save->g, g_free);
}

/* Pointers of token t, value head j of a rule. */
#define Q(r, t, j) ((r)->q + ((gsize) (t) * (r)->n_key_heads + (j) / ((r)->n_value_heads / (r)->n_key_heads)) * (r)->key_dim)
#define K(r, t, j) ((r)->k + ((gsize) (t) * (r)->n_key_heads + (j) / ((r)->n_value_heads / (r)->n_key_heads)) * (r)->key_dim)
#define V(r, t, j) ((r)->v + ((gsize) (t) * (r)->n_value_heads + (j)) * (r)->value_dim)
#define O(r, t, j) ((r)->out + ((gsize) (t) * (r)->n_value_heads + (j)) * (r)->value_dim)
#define AT(r, x, t, j) ((r)->x[(gsize) (t) * (r)->n_value_heads + (j)])

static void
recurrent_heads (gpointer data, guint begin, guint end)
{
  const DcpCpuDeltaRule *r = data;
  guint dk = r->key_dim, dv = r->value_dim;
  g_autofree float *delta = g_new (float, dv);

  for (guint j = begin; j < end; j++)
    {
      float *S = r->state + (gsize) j * dk * dv;   /* S[i, c] = S[i * dv + c] */

      for (guint t = 0; t < r->n_tokens; t++)
        {
          const float *q = Q (r, t, j), *k = K (r, t, j), *v = V (r, t, j);
          float decay = expf (AT (r, g, t, j)), beta = AT (r, beta, t, j);
          float *o = O (r, t, j);

          dcp_cpu_scale (S, decay, dk * dv);
          /* delta = beta (v - S^T k) */
          memcpy (delta, v, dv * sizeof (float));
          for (guint i = 0; i < dk; i++)
            dcp_cpu_axpy (delta, -k[i], S + i * dv, dv);
          dcp_cpu_scale (delta, beta, dv);
          /* S += k delta^T; o = S^T q */
          memset (o, 0, dv * sizeof (float));
          for (guint i = 0; i < dk; i++)
            {
              dcp_cpu_axpy (S + i * dv, k[i], delta, dv);
              dcp_cpu_axpy (o, q[i], S + i * dv, dv);
            }
        }
    }
}

void
dcp_cpu_delta_rule_recurrent (DcpCpuPool *pool, const DcpCpuDeltaRule *rule)
{
  dcp_cpu_pool_run (pool, rule->n_value_heads, recurrent_heads, (gpointer) rule);
}

typedef struct {
  const DcpCpuDeltaRule *rule;
  guint chunk;
} ChunkedJob;

/* One value head, chunk by chunk. The cumulative log decays are kept in double: with strong
 * decays they reach -1000 within a chunk, and a float sum would leave exp(gam_r - gam_s) of
 * nearby rows (the ones that matter) with a relative error of 1e-4. Within a chunk of n rows with cumulative log decay
 * gam[r] = g[0] + ... + g[r] and the chunk's starting state S:
 *   A[r][s] = beta_r (k_r . k_s) exp(gam_r - gam_s)            for s < r
 *   U_r = beta_r v_r - sum_{s<r} A[r][s] U_s                    ((I + A) U = beta V)
 *   W_r = beta_r exp(gam_r) k_r - sum_{s<r} A[r][s] W_s         ((I + A) W = beta e^gam K)
 *   Vn_r = U_r - W_r S                                          (the corrected values)
 *   o_r = exp(gam_r) q_r S + sum_{s<=r} (q_r . k_s) exp(gam_r - gam_s) Vn_s
 *   S  <- exp(gam_last) S + sum_r exp(gam_last - gam_r) k_r Vn_r^T */
static void
chunked_heads (gpointer data, guint begin, guint end)
{
  const ChunkedJob *job = data;
  const DcpCpuDeltaRule *r = job->rule;
  guint C = job->chunk, dk = r->key_dim, dv = r->value_dim;
  g_autofree double *gam = g_new (double, C);
  g_autofree float *A = g_new (float, (gsize) C * C);
  g_autofree float *U = g_new (float, (gsize) C * dv);
  g_autofree float *W = g_new (float, (gsize) C * dk);

  for (guint j = begin; j < end; j++)
    {
      float *S = r->state + (gsize) j * dk * dv;

      for (guint t0 = 0; t0 < r->n_tokens; t0 += C)
        {
          guint n = MIN (C, r->n_tokens - t0);
          double last;

          for (guint a = 0; a < n; a++)
            gam[a] = (a > 0 ? gam[a - 1] : 0.0) + AT (r, g, t0 + a, j);
          last = gam[n - 1];

          for (guint a = 0; a < n; a++)
            for (guint s = 0; s < a; s++)
              A[a * C + s] = AT (r, beta, t0 + a, j) *
                             dcp_cpu_dot (K (r, t0 + a, j), K (r, t0 + s, j), dk) *
                             (float) exp (gam[a] - gam[s]);

          /* Forward substitution for U and W; then U becomes Vn = U - W S. */
          for (guint a = 0; a < n; a++)
            {
              float beta = AT (r, beta, t0 + a, j), ea = (float) exp (gam[a]);
              const float *v = V (r, t0 + a, j), *k = K (r, t0 + a, j);
              float *u = U + (gsize) a * dv, *w = W + (gsize) a * dk;

              for (guint c = 0; c < dv; c++)
                u[c] = beta * v[c];
              for (guint i = 0; i < dk; i++)
                w[i] = beta * ea * k[i];
              for (guint s = 0; s < a; s++)
                {
                  dcp_cpu_axpy (u, -A[a * C + s], U + (gsize) s * dv, dv);
                  dcp_cpu_axpy (w, -A[a * C + s], W + (gsize) s * dk, dk);
                }
            }
          for (guint a = 0; a < n; a++)
            for (guint i = 0; i < dk; i++)
              dcp_cpu_axpy (U + (gsize) a * dv, -W[(gsize) a * dk + i], S + i * dv, dv);

          /* Outputs from the chunk's starting state and the corrected values. */
          for (guint a = 0; a < n; a++)
            {
              const float *q = Q (r, t0 + a, j);
              float *o = O (r, t0 + a, j), ea = (float) exp (gam[a]);

              memset (o, 0, dv * sizeof (float));
              for (guint i = 0; i < dk; i++)
                dcp_cpu_axpy (o, q[i], S + i * dv, dv);
              dcp_cpu_scale (o, ea, dv);
              for (guint s = 0; s <= a; s++)
                {
                  float x = dcp_cpu_dot (q, K (r, t0 + s, j), dk) * (float) exp (gam[a] - gam[s]);

                  dcp_cpu_axpy (o, x, U + (gsize) s * dv, dv);
                }
            }

          /* The state at the end of the chunk. */
          dcp_cpu_scale (S, (float) exp (last), dk * dv);
          for (guint a = 0; a < n; a++)
            {
              const float *k = K (r, t0 + a, j);
              float x = (float) exp (last - gam[a]);

              for (guint i = 0; i < dk; i++)
                dcp_cpu_axpy (S + i * dv, x * k[i], U + (gsize) a * dv, dv);
            }
        }
    }
}

void
dcp_cpu_delta_rule_chunked (DcpCpuPool *pool, const DcpCpuDeltaRule *rule, guint chunk_size)
{
  ChunkedJob job = { rule, chunk_size };

  g_assert (chunk_size > 0);
  dcp_cpu_pool_run (pool, rule->n_value_heads, chunked_heads, &job);
}

/* Causal depthwise conv of x [n_tokens, conv_dim] over time, continuing from the conv state
 * (the previous kernel - 1 inputs per channel), then SiLU, into u; the state moves on. */
static void
conv_silu (const DcpCpuGdnWeights *w, DcpCpuGdnState *s, const float *x, guint n_tokens, float *u)
{
  guint kernel_size = s->conv_width + 1, D = s->conv_dim;
  g_autofree float *window = g_new (float, s->conv_width + n_tokens);

  for (guint c = 0; c < D; c++)
    {
      const float *kernel = w->conv + (gsize) c * kernel_size;

      /* window = [state of c | x[0..n_tokens) of c] */
      memcpy (window, s->conv + (gsize) c * s->conv_width, s->conv_width * sizeof (float));
      for (guint t = 0; t < n_tokens; t++)
        window[s->conv_width + t] = x[(gsize) t * D + c];
      for (guint t = 0; t < n_tokens; t++)
        {
          float acc = 0;

          for (guint j = 0; j < kernel_size; j++)
            acc += kernel[j] * window[t + j];
          u[(gsize) t * D + c] = dcp_cpu_silu (acc);
        }
      memcpy (s->conv + (gsize) c * s->conv_width, window + n_tokens, s->conv_width * sizeof (float));
    }
}

/* The conv window after the first n_keep saved rows: the last conv_width of [state before |
 * those rows' pre-conv inputs], per channel. */
static void
keep_conv (const DcpCpuGdnSave *save, DcpCpuGdnState *s, guint n_keep)
{
  guint W = s->conv_width, D = s->conv_dim;

  for (guint c = 0; c < D; c++)
    for (guint i = 0; i < W; i++)
      {
        guint t = n_keep + i; /* index into [before (W) | rows] */

        s->conv[(gsize) c * W + i] =
            t < W ? save->before.conv[(gsize) c * W + t] : save->mixed[(gsize) (t - W) * D + c];
      }
}

void
dcp_cpu_gdn_keep (DcpCpuPool *pool, const DcpModelConfig *c, const DcpCpuGdnSave *save,
                  DcpCpuGdnState *s, guint n_keep, guint chunk_size)
{
  guint hv = c->linear_n_value_heads, dv = c->linear_value_head_dim;
  g_autofree float *o = g_new (float, (gsize) MAX (n_keep, 1) * hv * dv);
  DcpCpuDeltaRule rule = { n_keep,     c->linear_n_key_heads,
                           hv,         c->linear_key_head_dim,
                           dv,         save->q,
                           save->k,    save->v,
                           save->beta, save->g,
                           s->state,   o };

  g_assert (n_keep <= save->max_rows);
  dcp_cpu_gdn_state_copy (s, &save->before);
  keep_conv (save, s, n_keep);
  if (n_keep == 0)
    return;
  if (chunk_size > 0 && n_keep > 1)
    dcp_cpu_delta_rule_chunked (pool, &rule, chunk_size);
  else
    dcp_cpu_delta_rule_recurrent (pool, &rule);
}

void
dcp_cpu_gdn_forward (DcpCpuPool *pool, const DcpModelConfig *c, const DcpCpuGdnWeights *w,
                     DcpCpuGdnState *s, const float *h, guint n_tokens, guint chunk_size,
                     DcpCpuGdnSave *save, float *out)
{
  guint hk = c->linear_n_key_heads, hv = c->linear_n_value_heads;
  guint dk = c->linear_key_head_dim, dv = c->linear_value_head_dim;
  guint key_dim = hk * dk, value_dim = hv * dv, D = s->conv_dim;
  float eps = (float) c->rms_norm_eps, q_scale = 1.0f / sqrtf ((float) dk);
  g_autofree float *mixed = g_new (float, (gsize) n_tokens * D);
  g_autofree float *u = g_new (float, (gsize) n_tokens * D);
  g_autofree float *z = g_new (float, (gsize) n_tokens * value_dim);
  g_autofree float *b = g_new (float, (gsize) n_tokens * hv);
  g_autofree float *a = g_new (float, (gsize) n_tokens * hv);
  g_autofree float *q = g_new (float, (gsize) n_tokens * key_dim);
  g_autofree float *k = g_new (float, (gsize) n_tokens * key_dim);
  g_autofree float *v = g_new (float, (gsize) n_tokens * value_dim);
  g_autofree float *o = g_new (float, (gsize) n_tokens * value_dim);
  DcpCpuDeltaRule rule = { n_tokens, hk, hv, dk, dv, q, k, v, b, a, s->state, o };

  dcp_cpu_matmul (pool, &w->qkv, h, n_tokens, mixed);
  dcp_cpu_matmul (pool, &w->z, h, n_tokens, z);
  dcp_cpu_matmul (pool, &w->b, h, n_tokens, b);
  dcp_cpu_matmul (pool, &w->a, h, n_tokens, a);
  if (save != NULL)
    {
      g_assert (n_tokens <= save->max_rows);
      dcp_cpu_gdn_state_copy (&save->before, s);
      memcpy (save->mixed, mixed, (gsize) n_tokens * D * sizeof (float));
    }
  conv_silu (w, s, mixed, n_tokens, u);

  for (guint t = 0; t < n_tokens; t++)
    {
      const float *ut = u + (gsize) t * D;

      memcpy (q + (gsize) t * key_dim, ut, key_dim * sizeof (float));
      memcpy (k + (gsize) t * key_dim, ut + key_dim, key_dim * sizeof (float));
      memcpy (v + (gsize) t * value_dim, ut + 2 * key_dim, value_dim * sizeof (float));
      for (guint head = 0; head < hk; head++)
        {
          float *qh = q + (gsize) t * key_dim + head * dk;

          dcp_cpu_l2_norm (qh, dk, 1e-6f);
          for (guint i = 0; i < dk; i++)
            qh[i] *= q_scale;
          dcp_cpu_l2_norm (k + (gsize) t * key_dim + head * dk, dk, 1e-6f);
        }
      /* b becomes beta and a becomes g, in place */
      for (guint j = 0; j < hv; j++)
        {
          gsize i = (gsize) t * hv + j;

          b[i] = dcp_cpu_sigmoid (b[i]);
          a[i] = -expf (w->a_log[j]) * dcp_cpu_softplus (a[i] + w->dt_bias[j]);
        }
    }

  if (save != NULL)
    {
      memcpy (save->q, q, (gsize) n_tokens * key_dim * sizeof (float));
      memcpy (save->k, k, (gsize) n_tokens * key_dim * sizeof (float));
      memcpy (save->v, v, (gsize) n_tokens * value_dim * sizeof (float));
      memcpy (save->beta, b, (gsize) n_tokens * hv * sizeof (float));
      memcpy (save->g, a, (gsize) n_tokens * hv * sizeof (float));
    }
  if (chunk_size > 0 && n_tokens > 1)
    dcp_cpu_delta_rule_chunked (pool, &rule, chunk_size);
  else
    dcp_cpu_delta_rule_recurrent (pool, &rule);

  /* Gated RMSNorm per value head: norm(o) * w * silu(z). */
  for (guint t = 0; t < n_tokens; t++)
    for (guint j = 0; j < hv; j++)
      {
        float *oj = o + (gsize) t * value_dim + j * dv;
        const float *zj = z + (gsize) t * value_dim + j * dv;

        dcp_cpu_rms_norm (oj, w->norm, dv, eps, oj);
        for (guint i = 0; i < dv; i++)
          oj[i] *= dcp_cpu_silu (zj[i]);
      }
  dcp_cpu_matmul (pool, &w->out, o, n_tokens, out);
}
