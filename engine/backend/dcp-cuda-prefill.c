/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-prefill"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cuda-error.h"
#include "dcp-cuda-prefill.h"

struct _DcpCudaPrefill {
  const DcpCudaWeights *w;
  DcpCudaKv *kv;
  void *stream;
  guint max_rows;
  guint n_gdn, n_attn;
  DcpkKvLayout kv_layout;
  DcpkGdnShape gdn_shape;
  DcpkGemm *gemm;
  DcpkGemmPrecision precision;
  /* per-pass inputs: host (page-locked) and device int32 blocks, see IN_* below */
  gint32 *h_in, *d_in;
  gsize in_cap;
  float **h_ptrs, **d_ptrs;      /* [2][n_gdn][n_single]: single rows' conv, recurrent states */
  /* activations, max_rows rows each */
  float *x, *h, *delta, *proj, *qkv, *z, *b, *a, *mix, *qg, *k, *v, *gu, *act;
  float *out_h, *logits;         /* DCP_CUDA_PREFILL_MAX_OUT rows; the outputs' hidden states
                                    end in h's first rows */
  void *gdn_ws, *attn_ws;
  gsize attn_ws_bytes;
  GPtrArray *allocations;
  /* the pass being run */
  guint n_out;
  guint max_kv, max_q;
};

/* Offsets into the per-pass int32 block: tokens, positions, slots [max_rows] each, then
 * q_indptr and page_indptr [max_rows + 1], last_len [max_rows], then the page indices. */
#define IN_TOKENS(s)   0
#define IN_POS(s)      ((gsize) (s)->max_rows)
#define IN_SLOTS(s)    (2 * (gsize) (s)->max_rows)
#define IN_QPTR(s)     (3 * (gsize) (s)->max_rows)
#define IN_PPTR(s)     (4 * (gsize) (s)->max_rows + 1)
#define IN_LAST(s)     (5 * (gsize) (s)->max_rows + 2)
#define IN_INDICES(s)  (6 * (gsize) (s)->max_rows + 2)

static void *
device_alloc (DcpCudaPrefill *self, gsize bytes, GError **error)
{
  void *d = NULL;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (bytes, 16)), "prefill buffers", error))
    return NULL;
  g_ptr_array_add (self->allocations, d);
  return d;
}

static gsize
matrix_workspace (DcpkGemmPrecision precision, const DcpCudaMatrix *m, int max_m)
{
  return m->data == NULL ? 0 :
         dcpk_gemm_workspace_bytes (precision, m->format, max_m, m->rows, m->cols);
}

static gsize
proj_workspace (DcpkGemmPrecision precision, const DcpCudaProj *p, int max_m)
{
  gsize most = 0;

  for (guint i = 0; i < p->n_runs; i++)
    most = MAX (most, matrix_workspace (precision, &p->runs[i], max_m));
  return most;
}

/* What the largest matrix product of a pass needs (the lm_head runs as GEMVs). */
static gsize
gemm_workspace (const DcpCudaWeights *w, DcpkGemmPrecision precision, int max_m)
{
  gsize most = 0;

  for (guint l = 0; l < w->config.n_layers; l++)
    {
      const DcpCudaLayer *L = &w->layers[l];
      gsize m[] = { matrix_workspace (precision, &L->q, max_m), matrix_workspace (precision, &L->k, max_m),
                    matrix_workspace (precision, &L->v, max_m), matrix_workspace (precision, &L->o, max_m),
                    matrix_workspace (precision, &L->out, max_m), matrix_workspace (precision, &L->down, max_m),
                    proj_workspace (precision, &L->in_proj, max_m), proj_workspace (precision, &L->gate_up, max_m) };

      for (guint i = 0; i < G_N_ELEMENTS (m); i++)
        most = MAX (most, m[i]);
    }
  return most;
}

static float *
rows_of (DcpCudaPrefill *self, gsize rows, gsize width, GError **error)
{
  return device_alloc (self, rows * width * sizeof (float), error);
}

guint
dcp_cuda_prefill_tables (const DcpCudaPrefillSeq *seqs, guint n_seqs, gint32 *positions,
                         gint32 *slots, gint32 *q_indptr, gint32 *page_indptr,
                         gint32 *page_indices, gint32 *last_len, guint *max_q)
{
  guint row = 0, n = 0, longest = 0;

  *max_q = 0;
  q_indptr[0] = page_indptr[0] = 0;
  for (guint i = 0; i < n_seqs; i++)
    {
      const DcpCudaPrefillSeq *s = &seqs[i];
      guint len = s->pos + s->n_tokens, n_pages = dcp_cuda_kv_pages_for (len);

      g_assert (s->pages == NULL || s->pages->len >= n_pages);
      for (guint t = 0; t < s->n_tokens; t++, row++)
        {
          guint p = s->pos + t;

          positions[row] = (gint32) p;
          slots[row] = s->pages == NULL ? -1 :
            (gint32) (g_array_index (s->pages, guint32, p / DCPK_KV_PAGE_TOKENS) *
                      DCPK_KV_PAGE_TOKENS + p % DCPK_KV_PAGE_TOKENS);
        }
      q_indptr[i + 1] = (gint32) row;
      if (s->pages != NULL)
        for (guint p = 0; p < n_pages; p++)
          page_indices[n++] = (gint32) g_array_index (s->pages, guint32, p);
      page_indptr[i + 1] = (gint32) n;
      last_len[i] = (gint32) (len - DCPK_KV_PAGE_TOKENS * (n_pages - 1));
      longest = MAX (longest, len);
      *max_q = MAX (*max_q, s->n_tokens);
    }
  return longest;
}

DcpCudaPrefill *
dcp_cuda_prefill_new (const DcpCudaWeights *w, guint max_rows, gboolean fp8, void *stream,
                      GError **error)
{
  const DcpModelConfig *c = &w->config;
  DcpCudaPrefill *self = g_new0 (DcpCudaPrefill, 1);
  gsize H = c->hidden_size, I = c->intermediate_size, R = max_rows;
  gsize hv = c->linear_n_value_heads, vd = hv * c->linear_value_head_dim;
  gsize conv_dim = 2 * (gsize) c->linear_n_key_heads * c->linear_key_head_dim + vd;
  gsize qd = (gsize) c->n_heads * c->head_dim, kvd = (gsize) c->n_kv_heads * c->head_dim;
  gsize proj_width = MAX (conv_dim + vd + 2 * hv, 2 * I);
  void *p = NULL;

  g_return_val_if_fail (max_rows >= 1, NULL);
  self->w = w;
  self->stream = stream;
  self->max_rows = max_rows;
  self->allocations = g_ptr_array_new ();
  for (guint l = 0; l < c->n_layers; l++)
    {
      if (c->is_full_attention[l])
        self->n_attn++;
      else
        self->n_gdn++;
    }
  self->gdn_shape = (DcpkGdnShape) { (int) c->linear_n_key_heads, (int) c->linear_n_value_heads,
                                     (int) c->linear_key_head_dim, (int) c->linear_value_head_dim,
                                     (int) c->linear_conv_kernel, (float) c->rms_norm_eps };

  self->precision = fp8 ? DCPK_GEMM_FP8 : DCPK_GEMM_BF16;
  if (!dcp_cuda_check (dcpk_gemm_create (gemm_workspace (w, self->precision, (int) R), stream,
                                         &self->gemm), "prefill matrix products", error))
    goto fail;
  if (fp8)
    {
      int supported = 0;

      if (!dcp_cuda_check (dcpk_gemm_fp8_supported (self->gemm, &supported), "FP8 matrix products",
                           error))
        goto fail;
      if (!supported)
        {
          g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                               "fp8 activations: this GPU and cuBLASLt have no block-scaled FP8 "
                               "matrix product (Hopper has); use --activations bf16");
          goto fail;
        }
    }
  self->in_cap = IN_INDICES (self) + 64;
  if (!dcp_cuda_check (dcpk_malloc_host (&p, self->in_cap * sizeof (gint32)), "prefill inputs",
                       error))
    goto fail;
  self->h_in = p;
  if (!dcp_cuda_check (dcpk_malloc_host (&p, 2 * MAX (self->n_gdn, 1) * R * sizeof (float *)),
                       "prefill inputs", error))
    goto fail;
  self->h_ptrs = p;
  if (!(self->d_in = device_alloc (self, self->in_cap * sizeof (gint32), error)) ||
      !(self->d_ptrs = device_alloc (self, 2 * MAX (self->n_gdn, 1) * R * sizeof (float *), error)) ||
      !(self->x = rows_of (self, R, H, error)) ||
      !(self->h = rows_of (self, R, H, error)) ||
      !(self->delta = rows_of (self, R, H, error)) ||
      !(self->proj = rows_of (self, R, proj_width, error)) ||
      !(self->qkv = rows_of (self, R, conv_dim, error)) ||
      !(self->z = rows_of (self, R, vd, error)) ||
      !(self->b = rows_of (self, R, hv, error)) ||
      !(self->a = rows_of (self, R, hv, error)) ||
      !(self->mix = rows_of (self, R, MAX (vd, qd), error)) ||
      !(self->qg = rows_of (self, R, 2 * qd, error)) ||
      !(self->k = rows_of (self, R, kvd, error)) ||
      !(self->v = rows_of (self, R, kvd, error)) ||
      !(self->gu = rows_of (self, R, proj_width, error)) ||
      !(self->act = rows_of (self, R, I, error)) ||
      !(self->out_h = rows_of (self, DCP_CUDA_PREFILL_MAX_OUT, H, error)) ||
      !(self->logits = rows_of (self, DCP_CUDA_PREFILL_MAX_OUT, c->vocab_size, error)))
    goto fail;
  if (self->n_gdn > 0)
    {
      gsize ws = dcpk_gdn_prefill_workspace_size (&self->gdn_shape, (int) R);

      if (ws == 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "prefill kernels: GDN head dims %d/%d are over what they take",
                       self->gdn_shape.k_head_dim, self->gdn_shape.v_head_dim);
          goto fail;
        }
      if (!(self->gdn_ws = device_alloc (self, ws, error)))
        goto fail;
    }
  return self;

fail:
  dcp_cuda_prefill_free (self);
  return NULL;
}

void
dcp_cuda_prefill_free (DcpCudaPrefill *self)
{
  if (self == NULL)
    return;
  if (self->gemm != NULL)
    dcpk_gemm_destroy (self->gemm);
  for (guint i = 0; i < self->allocations->len; i++)
    dcpk_free (self->allocations->pdata[i]);
  g_ptr_array_unref (self->allocations);
  if (self->h_in != NULL)
    dcpk_free_host (self->h_in);
  if (self->h_ptrs != NULL)
    dcpk_free_host (self->h_ptrs);
  g_free (self);
}

guint
dcp_cuda_prefill_max_rows (DcpCudaPrefill *self)
{
  return self->max_rows;
}

#define TRY(call) do { int err_ = (call); if (err_ != 0) return err_; } while (0)

static int
matmul (DcpCudaPrefill *s, const DcpCudaMatrix *m, const float *x, int M, float *y)
{
  return dcpk_gemm (s->gemm, s->precision, m->format, m->data, m->rows, m->cols, x, FALSE, M, y,
                    FALSE);
}

static int
matmul_on (gpointer self, const DcpCudaMatrix *m, const float *x, int M, float *y)
{
  return matmul (self, m, x, M, y);
}

static int
proj_rows (DcpCudaPrefill *s, const DcpCudaProj *p, const float *x, int M, float *out,
           float *tmp)
{
  return dcp_cuda_proj_rows (p, matmul_on, s, x, M, out, tmp, s->stream);
}

/* A GDN layer: single-token sequences (the first n_single rows) through the decode kernel,
 * each longer one through the chunked prefill kernel. */
static int
gdn_layer (DcpCudaPrefill *s, const DcpCudaLayer *L, guint gi, const DcpCudaPrefillSeq *seqs,
           guint n_seqs, guint n_single, int M)
{
  const DcpCudaProj *p = &L->in_proj;
  const DcpkGdnShape *sh = &s->gdn_shape;
  int total = p->rows[0] + p->rows[1] + p->rows[2] + p->rows[3];
  float *dst[4] = { s->qkv, s->z, s->b, s->a };
  gsize conv_dim = (gsize) p->rows[0], vd = (gsize) p->rows[1], hv = (gsize) p->rows[2];
  gsize row = n_single;
  int col = 0;

  TRY (proj_rows (s, p, s->h, M, s->proj, s->gu));
  for (guint i = 0; i < 4; i++)
    {
      TRY (dcpk_memcpy2d_d2d_async (dst[i], (gsize) p->rows[i] * sizeof (float), s->proj + col,
                                    (gsize) total * sizeof (float),
                                    (gsize) p->rows[i] * sizeof (float), (gsize) M, s->stream));
      col += p->rows[i];
    }
  if (n_single > 0)
    TRY (dcpk_gdn_decode (sh, &L->gdn, (int) n_single, s->qkv, s->z, s->b, s->a,
                          s->d_ptrs + (gsize) gi * n_single,
                          s->d_ptrs + ((gsize) s->n_gdn + gi) * n_single, s->mix, s->stream));
  for (guint i = n_single; i < n_seqs; i++)
    {
      TRY (dcpk_gdn_prefill (sh, &L->gdn, (int) seqs[i].n_tokens, s->qkv + row * conv_dim,
                             s->z + row * vd, s->b + row * hv, s->a + row * hv,
                             seqs[i].conv[gi], seqs[i].recurrent[gi], s->mix + row * vd,
                             s->gdn_ws, s->stream));
      row += seqs[i].n_tokens;
    }
  return matmul (s, &L->out, s->mix, M, s->delta);
}

static int
attention_layer (DcpCudaPrefill *s, const DcpCudaLayer *L, guint ai, guint n_seqs, int M)
{
  const DcpModelConfig *c = &s->w->config;
  int nh = (int) c->n_heads, nkv = (int) c->n_kv_heads, hd = (int) c->head_dim;
  long qrow = 2L * nh * hd, krow = (long) nkv * hd;
  float eps = (float) c->rms_norm_eps;
  void *pages = dcp_cuda_kv_layer (s->kv, ai);

  TRY (matmul (s, &L->q, s->h, M, s->qg));
  TRY (matmul (s, &L->k, s->h, M, s->k));
  TRY (matmul (s, &L->v, s->h, M, s->v));
  TRY (dcpk_head_rms_norm (s->qg, M, nh, qrow, 2L * hd, hd, L->q_norm, eps, s->stream));
  TRY (dcpk_head_rms_norm (s->k, M, nkv, krow, hd, hd, L->k_norm, eps, s->stream));
  TRY (dcpk_rope (s->qg, M, nh, qrow, 2L * hd, (int) c->rotary_dim, c->rope_theta,
                  s->d_in + IN_POS (s), s->stream));
  TRY (dcpk_rope (s->k, M, nkv, krow, hd, (int) c->rotary_dim, c->rope_theta,
                  s->d_in + IN_POS (s), s->stream));
  TRY (dcpk_kv_append (&s->kv_layout, pages, s->k, s->v, s->d_in + IN_SLOTS (s), M, s->stream));
  TRY (dcpk_attention_prefill (&s->kv_layout, nh, 1.0f / sqrtf ((float) hd), pages,
                               s->d_in + IN_PPTR (s), s->d_in + IN_INDICES (s),
                               s->d_in + IN_LAST (s), (int) n_seqs, s->d_in + IN_QPTR (s), M,
                               (int) s->max_q, (int) s->max_kv, s->qg, s->mix, s->attn_ws,
                               s->stream));
  return matmul (s, &L->o, s->mix, M, s->delta);
}

/* The final norm of the asked-for rows and their logits. */
static int
outputs (DcpCudaPrefill *s, const DcpCudaPrefillSeq *seqs, guint n_seqs)
{
  const DcpCudaWeights *w = s->w;
  const DcpModelConfig *c = &w->config;
  gsize H = c->hidden_size, row = 0;
  guint n = 0;

  /* Gather the residual rows into out_h and delta's rows into h, in output order, then one
   * fused add + norm over them into h (the norm may write over its addend, not its residual). */
  for (guint i = 0; i < n_seqs; i++)
    {
      const DcpCudaPrefillSeq *q = &seqs[i];
      gsize first = q->all_rows ? row : row + q->n_tokens - 1;
      gsize count = q->no_rows ? 0 : q->all_rows ? q->n_tokens : 1;

      if (count > 0)
        {
          TRY (dcpk_memcpy_d2d_async (s->out_h + n * H, s->x + first * H,
                                      count * H * sizeof (float), s->stream));
          TRY (dcpk_memcpy_d2d_async (s->h + n * H, s->delta + first * H,
                                      count * H * sizeof (float), s->stream));
          n += (guint) count;
        }
      row += q->n_tokens;
    }
  s->n_out = n;
  if (n == 0)
    return 0;
  TRY (dcpk_add_rms_norm (s->out_h, s->h, w->norm, (int) n, (int) H, (float) c->rms_norm_eps,
                          s->h, s->stream));
  for (guint r = 0; r < n; r += DCPK_GEMV_MAX_BATCH)
    TRY (dcpk_gemv (w->lm_head.format, w->lm_head.data, w->lm_head.rows, w->lm_head.cols,
                    s->h + r * H, (int) MIN (DCPK_GEMV_MAX_BATCH, n - r),
                    s->logits + (gsize) r * c->vocab_size, s->stream));
  return 0;
}

static int
enqueue (DcpCudaPrefill *s, const DcpCudaPrefillSeq *seqs, guint n_seqs, guint n_single, int M)
{
  const DcpCudaWeights *w = s->w;
  const DcpModelConfig *c = &w->config;
  int H = (int) c->hidden_size, I = (int) c->intermediate_size;
  float eps = (float) c->rms_norm_eps;
  const float *add = NULL;
  guint gi = 0, ai = 0;

  TRY (dcpk_embed (w->embed, (int) c->vocab_size, H, s->d_in + IN_TOKENS (s), M, s->x, s->stream));
  for (guint l = 0; l < c->n_layers; l++)
    {
      const DcpCudaLayer *L = &w->layers[l];

      TRY (dcpk_add_rms_norm (s->x, add, L->input_norm, M, H, eps, s->h, s->stream));
      if (L->is_full_attention)
        TRY (attention_layer (s, L, ai++, n_seqs, M));
      else
        TRY (gdn_layer (s, L, gi++, seqs, n_seqs, n_single, M));
      TRY (dcpk_add_rms_norm (s->x, s->delta, L->post_norm, M, H, eps, s->h, s->stream));
      TRY (proj_rows (s, &L->gate_up, s->h, M, s->gu, s->proj));
      TRY (dcpk_swiglu (s->gu, M, I, s->act, s->stream));
      TRY (matmul (s, &L->down, s->act, M, s->delta));
      add = s->delta;
    }
  return outputs (s, seqs, n_seqs);
}

/* Room for n page indices in the per-pass block (grown between passes, never inside one). */
static gboolean
reserve_inputs (DcpCudaPrefill *self, gsize n_indices, GError **error)
{
  gsize need = IN_INDICES (self) + n_indices;
  void *p = NULL;

  if (need <= self->in_cap)
    return TRUE;
  need = MAX (need, 2 * self->in_cap);
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "prefill inputs", error) ||
      !dcp_cuda_check (dcpk_malloc_host (&p, need * sizeof (gint32)), "prefill inputs", error))
    return FALSE;
  dcpk_free_host (self->h_in);
  self->h_in = p;
  g_ptr_array_remove_fast (self->allocations, self->d_in);
  dcpk_free (self->d_in);
  if (!(self->d_in = device_alloc (self, need * sizeof (gint32), error)))
    return FALSE;
  self->in_cap = need;
  return TRUE;
}

gboolean
dcp_cuda_prefill_run (DcpCudaPrefill *self, DcpCudaKv *kv, const DcpCudaPrefillSeq *seqs,
                      guint n_seqs, GError **error)
{
  guint M = 0, n_single = 0, n_out = 0;
  gsize n_indices = 0, row = 0;

  g_return_val_if_fail (n_seqs >= 1, FALSE);
  g_return_val_if_fail (kv != NULL || self->n_attn == 0, FALSE);
  self->kv = kv;
  if (kv != NULL)
    self->kv_layout = *dcp_cuda_kv_get_layout (kv);
  for (guint i = 0; i < n_seqs; i++)
    {
      g_return_val_if_fail (seqs[i].n_tokens >= 1, FALSE);
      M += seqs[i].n_tokens;
      n_out += seqs[i].no_rows ? 0 : seqs[i].all_rows ? seqs[i].n_tokens : 1;
      n_indices += dcp_cuda_kv_pages_for (seqs[i].pos + seqs[i].n_tokens);
      /* single-token sequences come first: the GDN decode kernel takes them as one batch */
      if (seqs[i].n_tokens == 1 && n_single == i)
        n_single++;
    }
  if (M > self->max_rows || n_out > DCP_CUDA_PREFILL_MAX_OUT || n_seqs > self->max_rows)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "prefill pass of %u rows and %u outputs is over %u and %u", M, n_out,
                   self->max_rows, DCP_CUDA_PREFILL_MAX_OUT);
      return FALSE;
    }
  if (!reserve_inputs (self, self->kv != NULL ? n_indices : 0, error))
    return FALSE;
  for (guint i = 0; i < n_seqs; i++)
    for (guint t = 0; t < seqs[i].n_tokens; t++)
      self->h_in[IN_TOKENS (self) + row++] = (gint32) seqs[i].tokens[t];
  for (guint g = 0; g < self->n_gdn; g++)
    for (guint i = 0; i < n_single; i++)
      {
        self->h_ptrs[(gsize) g * n_single + i] = seqs[i].conv[g];
        self->h_ptrs[((gsize) self->n_gdn + g) * n_single + i] = seqs[i].recurrent[g];
      }
  self->max_kv = dcp_cuda_prefill_tables (seqs, n_seqs, self->h_in + IN_POS (self),
                                          self->h_in + IN_SLOTS (self),
                                          self->h_in + IN_QPTR (self),
                                          self->h_in + IN_PPTR (self),
                                          self->h_in + IN_INDICES (self),
                                          self->h_in + IN_LAST (self), &self->max_q);
  if (self->n_attn > 0)
    {
      gsize ws = dcpk_attention_prefill_workspace_bytes (&self->kv_layout,
                                                         (int) self->w->config.n_heads,
                                                         (int) n_seqs, (int) M, (int) self->max_q,
                                                         (int) self->max_kv);

      if (ws > self->attn_ws_bytes)
        {
          if (self->attn_ws != NULL)
            {
              if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "prefill", error))
                return FALSE;
              g_ptr_array_remove_fast (self->allocations, self->attn_ws);
              dcpk_free (self->attn_ws);
            }
          if (!(self->attn_ws = device_alloc (self, ws, error)))
            return FALSE;
          self->attn_ws_bytes = ws;
        }
    }
  if (!dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_in, self->h_in,
                                              (IN_INDICES (self) + n_indices) * sizeof (gint32),
                                              self->stream), "prefill inputs", error))
    return FALSE;
  if (n_single > 0 && self->n_gdn > 0 &&
      !dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_ptrs, self->h_ptrs,
                                              2 * (gsize) self->n_gdn * n_single *
                                              sizeof (float *), self->stream),
                       "prefill inputs", error))
    return FALSE;
  return dcp_cuda_check (enqueue (self, seqs, n_seqs, n_single, (int) M), "prefill", error);
}

float *
dcp_cuda_prefill_logits (DcpCudaPrefill *self, guint row)
{
  return self->logits + (gsize) row * self->w->config.vocab_size;
}

const float *
dcp_cuda_prefill_hidden (DcpCudaPrefill *self, guint row)
{
  return self->h + (gsize) row * self->w->config.hidden_size;
}
