/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-step"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cuda-error.h"
#include "dcp-cuda-step.h"

#define MAX_ROWS DCPK_GEMV_MAX_BATCH
#define N_BUCKETS 24

/* The per-step inputs, one host (page-locked) and one device block of int32:
 * tokens, positions, slots, indptr, last_len, then the page indices. */
enum { IN_TOKENS = 0, IN_POS = MAX_ROWS, IN_SLOTS = 2 * MAX_ROWS, IN_INDPTR = 3 * MAX_ROWS,
       IN_LAST = 4 * MAX_ROWS + 1, IN_INDICES = 5 * MAX_ROWS + 1 };

struct _DcpCudaStep {
  const DcpCudaWeights *w;
  DcpCudaKv *kv;
  void *stream;
  gboolean graphs_enabled;
  void *graphs[MAX_ROWS + 1][N_BUCKETS];
  guint n_gdn, n_attn;
  DcpkKvLayout kv_layout;
  DcpkGdnShape gdn_shape;
  guint max_kv_bucket;
  /* host inputs (page-locked) and their device copies */
  gint32 *h_in, *d_in;
  gsize in_len;
  float **h_ptrs, **d_ptrs;      /* [2][n_gdn][MAX_ROWS]: conv states, then recurrent states */
  /* activations, MAX_ROWS rows each */
  float *x, *h, *delta, *proj, *qkv, *z, *b, *a, *mix, *qg, *k, *v, *gu, *act, *logits;
  void *attn_ws;
  GPtrArray *allocations;
};

static float *
scratch (DcpCudaStep *self, gsize floats, GError **error)
{
  void *d = NULL;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (floats, 4) * sizeof (float)), "activations", error))
    return NULL;
  g_ptr_array_add (self->allocations, d);
  return d;
}

guint
dcp_cuda_step_kv_bucket (guint max_kv_len)
{
  guint bucket = 512;

  while (bucket < max_kv_len)
    bucket *= 2;
  return bucket;
}

static guint
bucket_index (guint bucket)
{
  guint i = 0;

  for (; (512u << i) < bucket; i++)
    ;
  return i;
}

guint
dcp_cuda_step_page_table (const DcpCudaStepRow *rows, guint n_rows, gint32 *indptr,
                          gint32 *indices, gint32 *last_len, gint32 *slots)
{
  guint n = 0, longest = 0;

  indptr[0] = 0;
  for (guint r = 0; r < n_rows; r++)
    {
      guint len = rows[r].pos + 1, n_pages = dcp_cuda_kv_pages_for (len);
      guint page = g_array_index (rows[r].pages, guint32, rows[r].pos / DCPK_KV_PAGE_TOKENS);

      g_assert (rows[r].pages->len >= n_pages);
      for (guint p = 0; p < n_pages; p++)
        indices[n++] = (gint32) g_array_index (rows[r].pages, guint32, p);
      indptr[r + 1] = (gint32) n;
      last_len[r] = (gint32) (len - DCPK_KV_PAGE_TOKENS * (n_pages - 1));
      slots[r] = (gint32) (page * DCPK_KV_PAGE_TOKENS + rows[r].pos % DCPK_KV_PAGE_TOKENS);
      longest = MAX (longest, len);
    }
  return longest;
}

DcpCudaStep *
dcp_cuda_step_new (const DcpCudaWeights *w, DcpCudaKv *kv, void *stream, GError **error)
{
  const DcpModelConfig *c = &w->config;
  DcpCudaStep *self = g_new0 (DcpCudaStep, 1);
  gsize H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, R = MAX_ROWS;
  gsize hv = c->linear_n_value_heads, vd = hv * c->linear_value_head_dim;
  gsize conv_dim = 2 * (gsize) c->linear_n_key_heads * c->linear_key_head_dim + vd;
  gsize qd = (gsize) c->n_heads * c->head_dim, kvd = (gsize) c->n_kv_heads * c->head_dim;
  guint n_pages = kv != NULL ? dcp_cuda_kv_get_n_pages (kv) : 0;
  gsize proj_width = MAX (conv_dim + vd + 2 * hv, 2 * I);
  void *p = NULL;

  self->w = w;
  self->kv = kv;
  self->stream = stream;
  self->graphs_enabled = TRUE;
  self->allocations = g_ptr_array_new ();
  for (guint l = 0; l < c->n_layers; l++)
    {
      if (c->is_full_attention[l])
        self->n_attn++;
      else
        self->n_gdn++;
    }
  self->kv_layout = kv != NULL ? *dcp_cuda_kv_get_layout (kv)
                                : (DcpkKvLayout) { (int) c->n_kv_heads, (int) c->head_dim,
                                                   DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 };
  self->gdn_shape = (DcpkGdnShape) { (int) c->linear_n_key_heads, (int) c->linear_n_value_heads,
                                     (int) c->linear_key_head_dim, (int) c->linear_value_head_dim,
                                     (int) c->linear_conv_kernel, (float) c->rms_norm_eps };
  self->max_kv_bucket = dcp_cuda_step_kv_bucket (MAX (n_pages, 1) * DCPK_KV_PAGE_TOKENS);
  /* Rows may share pages (a common prefix): each row lists up to all of the pool's. */
  self->in_len = IN_INDICES + (gsize) MAX_ROWS * MAX (n_pages, 1);

  if (!dcp_cuda_check (dcpk_malloc_host (&p, self->in_len * sizeof (gint32)), "step inputs", error))
    goto fail;
  self->h_in = p;
  if (!dcp_cuda_check (dcpk_malloc_host (&p, 2 * MAX (self->n_gdn, 1) * R * sizeof (float *)),
                       "step inputs", error))
    goto fail;
  self->h_ptrs = p;
  memset (self->h_ptrs, 0, 2 * MAX (self->n_gdn, 1) * R * sizeof (float *));
  if (!(self->d_in = (gint32 *) scratch (self, self->in_len, error)) ||
      !(self->d_ptrs = (float **) scratch (self, 2 * MAX (self->n_gdn, 1) * R * 2, error)) ||
      !(self->x = scratch (self, R * H, error)) ||
      !(self->h = scratch (self, R * H, error)) ||
      !(self->delta = scratch (self, R * H, error)) ||
      !(self->proj = scratch (self, R * proj_width, error)) ||
      !(self->qkv = scratch (self, R * conv_dim, error)) ||
      !(self->z = scratch (self, R * vd, error)) ||
      !(self->b = scratch (self, R * hv, error)) ||
      !(self->a = scratch (self, R * hv, error)) ||
      !(self->mix = scratch (self, R * MAX (vd, qd), error)) ||
      !(self->qg = scratch (self, R * 2 * qd, error)) ||
      !(self->k = scratch (self, R * kvd, error)) ||
      !(self->v = scratch (self, R * kvd, error)) ||
      !(self->gu = scratch (self, R * proj_width, error)) ||
      !(self->act = scratch (self, R * I, error)) ||
      !(self->logits = scratch (self, R * V, error)))
    goto fail;
  if (self->n_attn > 0)
    {
      gsize ws = dcpk_attention_workspace_bytes (&self->kv_layout, (int) c->n_heads, MAX_ROWS,
                                                 (int) self->max_kv_bucket);

      if (!(self->attn_ws = scratch (self, ws / sizeof (float) + 1, error)))
        goto fail;
    }
  return self;

fail:
  dcp_cuda_step_free (self);
  return NULL;
}

void
dcp_cuda_step_free (DcpCudaStep *self)
{
  if (self == NULL)
    return;
  for (guint b = 0; b <= MAX_ROWS; b++)
    for (guint k = 0; k < N_BUCKETS; k++)
      dcpk_graph_destroy (self->graphs[b][k]);
  for (guint i = 0; i < self->allocations->len; i++)
    dcpk_free (self->allocations->pdata[i]);
  g_ptr_array_unref (self->allocations);
  if (self->h_in != NULL)
    dcpk_free_host (self->h_in);
  if (self->h_ptrs != NULL)
    dcpk_free_host (self->h_ptrs);
  g_free (self);
}

void
dcp_cuda_step_set_graphs (DcpCudaStep *self, gboolean enabled)
{
  self->graphs_enabled = enabled;
}

#define TRY(call) do { int err_ = (call); if (err_ != 0) return err_; } while (0)

static int
gemv (const DcpCudaMatrix *m, const float *x, int B, float *y, void *stream)
{
  return dcpk_gemv (m->format, m->data, m->rows, m->cols, x, B, y, stream);
}

/* A GEMV as the shared projection helper calls it (user: the stream). */
static int
gemv_on (gpointer stream, const DcpCudaMatrix *m, const float *x, int B, float *y)
{
  return gemv (m, x, B, y, stream);
}

static int
proj_rows (const DcpCudaProj *p, const float *x, int B, float *out, float *tmp, void *stream)
{
  return dcp_cuda_proj_rows (p, gemv_on, stream, x, B, out, tmp, stream);
}

static int
gdn_layer (DcpCudaStep *s, const DcpCudaLayer *L, guint gi, int B)
{
  const DcpCudaProj *p = &L->in_proj;
  int total = p->rows[0] + p->rows[1] + p->rows[2] + p->rows[3];
  float *dst[4] = { s->qkv, s->z, s->b, s->a };
  float *part[4];
  int col = 0;

  /* proj holds [qkv | z | b | a] per row; the GDN kernel wants each contiguous over rows. */
  TRY (proj_rows (p, s->h, B, s->proj, s->gu, s->stream));
  for (guint i = 0; i < 4; i++)
    {
      if (B == 1)
        part[i] = s->proj + col;
      else
        {
          part[i] = dst[i];
          TRY (dcpk_memcpy2d_d2d_async (dst[i], (gsize) p->rows[i] * sizeof (float), s->proj + col,
                                        (gsize) total * sizeof (float),
                                        (gsize) p->rows[i] * sizeof (float), (gsize) B, s->stream));
        }
      col += p->rows[i];
    }
  TRY (dcpk_gdn_decode (&s->gdn_shape, &L->gdn, B, part[0], part[1], part[2], part[3],
                        s->d_ptrs + (gsize) gi * MAX_ROWS,
                        s->d_ptrs + ((gsize) s->n_gdn + gi) * MAX_ROWS, s->mix, s->stream));
  return gemv (&L->out, s->mix, B, s->delta, s->stream);
}

static int
attention_layer (DcpCudaStep *s, const DcpCudaLayer *L, guint ai, int B, int kv_bucket)
{
  const DcpModelConfig *c = &s->w->config;
  int nh = (int) c->n_heads, nkv = (int) c->n_kv_heads, hd = (int) c->head_dim;
  long qrow = 2L * nh * hd, krow = (long) nkv * hd;
  float eps = (float) c->rms_norm_eps;
  void *pages = dcp_cuda_kv_layer (s->kv, ai);

  TRY (gemv (&L->q, s->h, B, s->qg, s->stream));
  TRY (gemv (&L->k, s->h, B, s->k, s->stream));
  TRY (gemv (&L->v, s->h, B, s->v, s->stream));
  TRY (dcpk_head_rms_norm (s->qg, B, nh, qrow, 2L * hd, hd, L->q_norm, eps, s->stream));
  TRY (dcpk_head_rms_norm (s->k, B, nkv, krow, hd, hd, L->k_norm, eps, s->stream));
  TRY (dcpk_rope (s->qg, B, nh, qrow, 2L * hd, (int) c->rotary_dim, c->rope_theta,
                  s->d_in + IN_POS, s->stream));
  TRY (dcpk_rope (s->k, B, nkv, krow, hd, (int) c->rotary_dim, c->rope_theta,
                  s->d_in + IN_POS, s->stream));
  TRY (dcpk_kv_append (&s->kv_layout, pages, s->k, s->v, s->d_in + IN_SLOTS, B, s->stream));
  if (hd == 64 || hd == 128 || hd == 256)
    TRY (dcpk_attention_decode (&s->kv_layout, nh, 1.0f / sqrtf ((float) hd), pages,
                                s->d_in + IN_INDPTR, s->d_in + IN_INDICES, s->d_in + IN_LAST, B,
                                NULL, B, kv_bucket, s->qg, s->mix, s->attn_ws, s->stream));
  else
    TRY (dcpk_attention_decode_simple (&s->kv_layout, nh, 1.0f / sqrtf ((float) hd), pages,
                                       s->d_in + IN_INDPTR, s->d_in + IN_INDICES,
                                       s->d_in + IN_LAST, B, s->qg, s->mix, s->stream));
  return gemv (&L->o, s->mix, B, s->delta, s->stream);
}

/* The whole step on the stream (what a graph captures). */
static int
enqueue (DcpCudaStep *s, int B, int kv_bucket)
{
  const DcpCudaWeights *w = s->w;
  const DcpModelConfig *c = &w->config;
  int H = (int) c->hidden_size, I = (int) c->intermediate_size;
  float eps = (float) c->rms_norm_eps;
  const float *add = NULL;
  guint gi = 0, ai = 0;

  TRY (dcpk_embed (w->embed, (int) c->vocab_size, H, s->d_in + IN_TOKENS, B, s->x, s->stream));
  for (guint l = 0; l < c->n_layers; l++)
    {
      const DcpCudaLayer *L = &w->layers[l];

      /* x += delta of the previous block (fused), h = norm (x) */
      TRY (dcpk_add_rms_norm (s->x, add, L->input_norm, B, H, eps, s->h, s->stream));
      if (L->is_full_attention)
        TRY (attention_layer (s, L, ai++, B, kv_bucket));
      else
        TRY (gdn_layer (s, L, gi++, B));
      TRY (dcpk_add_rms_norm (s->x, s->delta, L->post_norm, B, H, eps, s->h, s->stream));
      TRY (proj_rows (&L->gate_up, s->h, B, s->gu, s->proj, s->stream));
      TRY (dcpk_swiglu (s->gu, B, I, s->act, s->stream));
      TRY (gemv (&L->down, s->act, B, s->delta, s->stream));
      add = s->delta;
    }
  TRY (dcpk_add_rms_norm (s->x, add, w->norm, B, H, eps, s->h, s->stream));
  return gemv (&w->lm_head, s->h, B, s->logits, s->stream);
}

gboolean
dcp_cuda_step_run (DcpCudaStep *self, const DcpCudaStepRow *rows, guint n_rows, GError **error)
{
  gsize n_ptrs = 2 * (gsize) MAX (self->n_gdn, 1) * MAX_ROWS;
  guint kv_bucket = 0;
  gsize in_used = IN_INDICES;
  void **graph;
  int err;

  g_return_val_if_fail (n_rows >= 1 && n_rows <= MAX_ROWS, FALSE);
  for (guint r = 0; r < n_rows; r++)
    {
      self->h_in[IN_TOKENS + r] = (gint32) rows[r].token;
      self->h_in[IN_POS + r] = (gint32) rows[r].pos;
      for (guint g = 0; g < self->n_gdn; g++)
        {
          self->h_ptrs[(gsize) g * MAX_ROWS + r] = rows[r].conv[g];
          self->h_ptrs[((gsize) self->n_gdn + g) * MAX_ROWS + r] = rows[r].recurrent[g];
        }
    }
  if (self->n_attn > 0)
    kv_bucket = dcp_cuda_step_kv_bucket (
        dcp_cuda_step_page_table (rows, n_rows, self->h_in + IN_INDPTR, self->h_in + IN_INDICES,
                                  self->h_in + IN_LAST, self->h_in + IN_SLOTS));
  if (self->n_attn > 0)
    in_used += (gsize) self->h_in[IN_INDPTR + n_rows];
  if (kv_bucket > self->max_kv_bucket)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY, "KV length %u is over the pool's %u",
                   kv_bucket, self->max_kv_bucket);
      return FALSE;
    }
  if (!dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_in, self->h_in,
                                              in_used * sizeof (gint32), self->stream),
                       "step inputs", error) ||
      !dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_ptrs, self->h_ptrs, n_ptrs * sizeof (float *),
                                              self->stream), "step inputs", error))
    return FALSE;

  if (!self->graphs_enabled)
    return dcp_cuda_check (enqueue (self, (int) n_rows, (int) kv_bucket), "decode step", error);

  graph = &self->graphs[n_rows][bucket_index (MAX (kv_bucket, 512))];
  if (*graph == NULL)
    {
      err = dcpk_graph_begin (self->stream);
      if (err == 0)
        {
          err = enqueue (self, (int) n_rows, (int) kv_bucket);
          if (err != 0)
            dcpk_graph_abort (self->stream);
          else
            err = dcpk_graph_end (self->stream, graph);
        }
      if (err != 0)
        {
          /* Not fatal: the same work runs without a graph (and says why, once). */
          g_warning ("CUDA graph capture failed (%s: %s); decode steps run without graphs",
                     dcpk_error_name (err), dcpk_error_string (err));
          self->graphs_enabled = FALSE;
          return dcp_cuda_check (enqueue (self, (int) n_rows, (int) kv_bucket), "decode step", error);
        }
    }
  return dcp_cuda_check (dcpk_graph_launch (*graph, self->stream), "graph launch", error);
}

float *
dcp_cuda_step_logits (DcpCudaStep *self, guint row)
{
  return self->logits + (gsize) row * self->w->config.vocab_size;
}

const float *
dcp_cuda_step_hidden (DcpCudaStep *self, guint row)
{
  return self->h + (gsize) row * self->w->config.hidden_size;
}
