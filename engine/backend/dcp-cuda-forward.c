/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-forward"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cuda-error.h"
#include "dcp-cuda-forward.h"
#include "dcp-rope.h"

#define N_BUCKETS 24

struct _DcpCudaForward {
  const DcpCudaWeights *w;
  const DcpCudaCounts *n;        /* the weights' */
  DcpRope rope;                  /* the attention layers' rotary table, from the config */
  void *stream;
  guint max_rows;                /* of the activations: 16, or the prompt rows */
  guint prompt_rows;             /* 0: decode passes only */
  guint out_rows;                /* output rows of logits (and of out_h) */
  /* the pool attention reads, its formats, the decode graphs made for it */
  DcpCudaKv *kv;
  DcpkKvLayout kv_layout;
  guint max_kv_bucket;
  gboolean graphs_enabled;
  void *graphs[DCP_CUDA_DECODE_ROWS + 1][N_BUCKETS];
  /* prompt passes only: the matrix products, the chunked GDN's workspace */
  DcpkGemm *gemm;
  DcpkGemmPrecision precision;
  void *gdn_ws;
  /* the attention workspaces: decode (sized for kv's longest bucket), prefill (grown) */
  void *decode_ws, *prefill_ws;
  gsize prefill_ws_bytes;
  /* per-pass inputs: host (page-locked) and device int32 blocks of in_cap values: tokens
   * [max_rows], rotary positions [3][max_rows] (T, H, W), slots [max_rows], then q_indptr and
   * page_indptr [max_rows + 1], last_len [max_rows], then the page indices; `at` has where each
   * begins */
  gint32 *h_in, *d_in;
  gsize in_cap;
  struct { gsize tokens, pos, slots, qptr, pptr, last, indices; } at;
  float **h_ptrs, **d_ptrs;      /* [2][n_gdn][n_single]: single rows' conv, recurrent states */
  /* activations, max_rows rows each */
  float *x, *h, *delta, *proj, *qkv, *z, *b, *a, *mix, *qg, *k, *v, *gu, *act;
  float *out_h, *logits;         /* out_rows rows; the outputs' hidden states end in h's first
                                    rows */
  GPtrArray *allocations;
};

/* One pass as the layer walker reads it (what a decode graph captures depends on n_rows and
 * kv_bucket alone). */
typedef struct {
  DcpCudaPassKind kind;
  const DcpCudaSeq *seqs;
  guint n_seqs, n_single, n_rows, n_out;
  guint kv_bucket;               /* decode */
  guint max_q, max_kv;           /* prompt */
  gboolean mrope;                /* a sequence gives its own positions (an image's rows) */
} Pass;

static void *
device_alloc (DcpCudaForward *self, gsize bytes, GError **error)
{
  void *d = NULL;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (bytes, 16)), "forward buffers", error))
    return NULL;
  g_ptr_array_add (self->allocations, d);
  return d;
}

static void
device_free (DcpCudaForward *self, void *d)
{
  if (d == NULL)
    return;
  g_ptr_array_remove_fast (self->allocations, d);
  dcpk_free (d);
}

static float *
rows_of (DcpCudaForward *self, gsize rows, gsize width, GError **error)
{
  return device_alloc (self, rows * width * sizeof (float), error);
}

guint
dcp_cuda_forward_kv_bucket (guint max_kv_len)
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
dcp_cuda_forward_tables (const DcpCudaSeq *seqs, guint n_seqs, gint32 *positions, gsize pos_stride,
                         gint32 *slots, gint32 *q_indptr, gint32 *page_indptr, gint32 *page_indices,
                         gint32 *last_len, guint *max_q)
{
  guint row = 0, n = 0, longest = 0;

  *max_q = 0;
  q_indptr[0] = page_indptr[0] = 0;
  for (guint i = 0; i < n_seqs; i++)
    {
      const DcpCudaSeq *s = &seqs[i];
      guint len = s->pos + s->n_tokens, n_pages = dcp_cuda_kv_pages_for (len);

      g_assert (s->pages == NULL || s->pages->len >= n_pages);
      for (guint t = 0; t < s->n_tokens; t++, row++)
        {
          guint p = s->pos + t;

          for (guint axis = 0; axis < 3; axis++)
            positions[axis * pos_stride + row] =
                s->positions != NULL ? (gint32) s->positions[axis * s->positions_stride + t]
                                     : (gint32) p + s->rope_shift;
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

/* What the largest matrix product of a prompt pass needs (the lm_head runs as GEMVs). */
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

/* The prompt passes' own parts: the GEMM, the chunked GDN's workspace. */
static gboolean
prompt_parts_new (DcpCudaForward *self, gboolean fp8, GError **error)
{
  int supported = 0;

  self->precision = fp8 ? DCPK_GEMM_FP8 : DCPK_GEMM_BF16;
  if (!dcp_cuda_check (dcpk_gemm_create (gemm_workspace (self->w, self->precision,
                                                         (int) self->max_rows),
                                         self->stream, &self->gemm),
                       "prompt matrix products", error))
    return FALSE;
  if (fp8 && !dcp_cuda_check (dcpk_gemm_fp8_supported (self->gemm, &supported),
                              "FP8 matrix products", error))
    return FALSE;
  if (fp8 && !supported)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "fp8 activations: this GPU and cuBLASLt have no block-scaled FP8 "
                           "matrix product (Hopper has); use --activations bf16");
      return FALSE;
    }
  if (self->n->n_gdn > 0)
    {
      gsize ws = dcpk_gdn_prefill_workspace_size (&self->n->gdn_shape, (int) self->max_rows);

      if (ws == 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "prefill kernels: GDN head dims %d/%d are over what they take",
                       self->n->gdn_shape.k_head_dim, self->n->gdn_shape.v_head_dim);
          return FALSE;
        }
      if (!(self->gdn_ws = device_alloc (self, ws, error)))
        return FALSE;
    }
  return TRUE;
}

DcpCudaForward *
dcp_cuda_forward_new (const DcpCudaWeights *w, guint prompt_rows, gboolean fp8, void *stream,
                      GError **error)
{
  const DcpModelConfig *c = &w->config;
  const DcpCudaCounts *n = &w->counts;
  DcpCudaForward *self = g_new0 (DcpCudaForward, 1);
  gsize H = c->hidden_size, I = c->intermediate_size, R;
  gsize n_ptrs = 2 * (gsize) MAX (n->n_gdn, 1);
  void *p = NULL;

  self->w = w;
  self->n = n;
  dcp_rope_init (&self->rope, c);
  self->stream = stream;
  self->graphs_enabled = TRUE;
  self->prompt_rows = prompt_rows;
  self->max_rows = MAX (prompt_rows, DCP_CUDA_DECODE_ROWS);
  self->out_rows = prompt_rows > 0 ? MAX (DCP_CUDA_PROMPT_MAX_OUT, DCP_CUDA_DECODE_ROWS)
                                   : DCP_CUDA_DECODE_ROWS;
  self->allocations = g_ptr_array_new ();
  self->kv_layout = (DcpkKvLayout) { (int) c->n_kv_heads, (int) c->head_dim, DCPK_FORMAT_BF16,
                                     DCPK_FORMAT_BF16 };
  self->max_kv_bucket = dcp_cuda_forward_kv_bucket (DCPK_KV_PAGE_TOKENS);
  R = self->max_rows;
  self->at.tokens = 0;
  self->at.pos = R;
  self->at.slots = 4 * R;
  self->at.qptr = 5 * R;
  self->at.pptr = 6 * R + 1;
  self->at.last = 7 * R + 2;
  self->at.indices = 8 * R + 2;
  if (prompt_rows > 0 && !prompt_parts_new (self, fp8, error))
    goto fail;
  self->in_cap = self->at.indices + 64;
  if (!dcp_cuda_check (dcpk_malloc_host (&p, self->in_cap * sizeof (gint32)), "forward inputs",
                       error))
    goto fail;
  self->h_in = p;
  if (!dcp_cuda_check (dcpk_malloc_host (&p, n_ptrs * R * sizeof (float *)), "forward inputs",
                       error))
    goto fail;
  self->h_ptrs = p;
  memset (self->h_ptrs, 0, n_ptrs * R * sizeof (float *));
  if (!(self->d_in = device_alloc (self, self->in_cap * sizeof (gint32), error)) ||
      !(self->d_ptrs = device_alloc (self, n_ptrs * R * sizeof (float *), error)) ||
      !(self->x = rows_of (self, R, H, error)) ||
      !(self->h = rows_of (self, R, H, error)) ||
      !(self->delta = rows_of (self, R, H, error)) ||
      !(self->proj = rows_of (self, R, n->proj_width, error)) ||
      !(self->qkv = rows_of (self, R, n->conv_dim, error)) ||
      !(self->z = rows_of (self, R, n->vd, error)) ||
      !(self->b = rows_of (self, R, n->hv, error)) ||
      !(self->a = rows_of (self, R, n->hv, error)) ||
      !(self->mix = rows_of (self, R, MAX (n->vd, n->qd), error)) ||
      !(self->qg = rows_of (self, R, 2 * n->qd, error)) ||
      !(self->k = rows_of (self, R, n->kvd, error)) ||
      !(self->v = rows_of (self, R, n->kvd, error)) ||
      !(self->gu = rows_of (self, R, n->proj_width, error)) ||
      !(self->act = rows_of (self, R, I, error)) ||
      !(self->logits = rows_of (self, self->out_rows, c->vocab_size, error)))
    goto fail;
  if (prompt_rows > 0 && !(self->out_h = rows_of (self, self->out_rows, H, error)))
    goto fail;
  return self;

fail:
  dcp_cuda_forward_free (self);
  return NULL;
}

static void
drop_graphs (DcpCudaForward *self)
{
  for (guint b = 0; b <= DCP_CUDA_DECODE_ROWS; b++)
    for (guint k = 0; k < N_BUCKETS; k++)
      g_clear_pointer (&self->graphs[b][k], dcpk_graph_destroy);
}

void
dcp_cuda_forward_free (DcpCudaForward *self)
{
  if (self == NULL)
    return;
  drop_graphs (self);
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
dcp_cuda_forward_prompt_rows (DcpCudaForward *self)
{
  return self->prompt_rows;
}

void
dcp_cuda_forward_set_graphs (DcpCudaForward *self, gboolean enabled)
{
  self->graphs_enabled = enabled;
}

/* Room for n page indices in the input block (grown between passes, never inside one; the
 * decode graphs read the old block's addresses, so they go). */
static gboolean
reserve_inputs (DcpCudaForward *self, gsize n_indices, GError **error)
{
  gsize need = self->at.indices + n_indices;
  void *p = NULL;

  if (need <= self->in_cap)
    return TRUE;
  need = MAX (need, 2 * self->in_cap);
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "forward inputs", error) ||
      !dcp_cuda_check (dcpk_malloc_host (&p, need * sizeof (gint32)), "forward inputs", error))
    return FALSE;
  drop_graphs (self);
  dcpk_free_host (self->h_in);
  self->h_in = p;
  device_free (self, self->d_in);
  if (!(self->d_in = device_alloc (self, need * sizeof (gint32), error)))
    return FALSE;
  self->in_cap = need;
  return TRUE;
}

gboolean
dcp_cuda_forward_set_kv (DcpCudaForward *self, DcpCudaKv *kv, GError **error)
{
  const DcpModelConfig *c = &self->w->config;
  guint n_pages;

  if (kv == self->kv)
    return TRUE;
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "forward", error))
    return FALSE;
  drop_graphs (self);
  device_free (self, self->decode_ws);
  self->decode_ws = NULL;
  device_free (self, self->prefill_ws);
  self->prefill_ws = NULL;
  self->prefill_ws_bytes = 0;
  self->kv = NULL;
  if (kv == NULL)
    return TRUE;
  n_pages = dcp_cuda_kv_get_n_pages (kv);
  self->kv_layout = *dcp_cuda_kv_get_layout (kv);
  self->max_kv_bucket = dcp_cuda_forward_kv_bucket (MAX (n_pages, 1) * DCPK_KV_PAGE_TOKENS);
  /* Decode rows may share pages (a common prefix): each lists up to all of the pool's. */
  if (!reserve_inputs (self, (gsize) DCP_CUDA_DECODE_ROWS * MAX (n_pages, 1), error))
    return FALSE;
  if (self->n->n_attn > 0)
    {
      gsize ws = dcpk_attention_workspace_bytes (&self->kv_layout, (int) c->n_heads,
                                                 DCP_CUDA_DECODE_ROWS, (int) self->max_kv_bucket);

      if (!(self->decode_ws = device_alloc (self, ws + sizeof (float), error)))
        return FALSE;
    }
  self->kv = kv;
  return TRUE;
}

DcpCudaKv *
dcp_cuda_forward_get_kv (DcpCudaForward *self)
{
  return self->kv;
}

#define TRY(call) do { int err_ = (call); if (err_ != 0) return err_; } while (0)

/* Passes of up to this many rows run GEMVs, DCPK_GEMV_MAX_BATCH rows per call. */
#define GEMV_PASS_MAX_ROWS (2 * DCPK_GEMV_MAX_BATCH)

static int
gemv_on (gpointer user, const DcpCudaMatrix *m, const float *x, int rows, float *y)
{
  DcpCudaForward *s = user;

  for (int r = 0; r < rows; r += DCPK_GEMV_MAX_BATCH)
    TRY (dcpk_gemv (m->format, m->data, m->rows, m->cols, x + (gsize) r * m->cols,
                    MIN (DCPK_GEMV_MAX_BATCH, rows - r), y + (gsize) r * m->rows, s->stream));
  return 0;
}

static int
gemm_on (gpointer user, const DcpCudaMatrix *m, const float *x, int rows, float *y)
{
  DcpCudaForward *s = user;

  return dcpk_gemm (s->gemm, s->precision, m->format, m->data, m->rows, m->cols, x, FALSE, rows,
                    y, FALSE);
}

/* The matrix product of the pass: GEMVs when the pass has few rows (a decode pass, verify
 * steps' drafts, a prompt's short tail), GEMMs otherwise. A GEMM of an MX matrix converts the
 * whole matrix first: at 2..16 rows that alone cost 3.7x a decode step, where the GEMV reads
 * the weights as they are. Two 16-row GEMVs still beat the GEMM a little at 17..32 rows; at
 * 36..48 rows three were slower (H200, 27B shapes, 2026-12-03; docs/PERFORMANCE.md). */
static DcpCudaMatmulFn
matmul_fn (const Pass *p)
{
  return p->kind == DCP_CUDA_PASS_DECODE || p->n_rows <= GEMV_PASS_MAX_ROWS ? gemv_on : gemm_on;
}

static int
matmul (DcpCudaForward *s, const Pass *p, const DcpCudaMatrix *m, const float *x, float *y)
{
  return matmul_fn (p) (s, m, x, (int) p->n_rows, y);
}

static int
proj_rows (DcpCudaForward *s, const Pass *p, const DcpCudaProj *proj, const float *x, float *out,
           float *tmp)
{
  return dcp_cuda_proj_rows (proj, matmul_fn (p), s, x,
                             (int) p->n_rows, out, tmp, s->stream);
}

/* A GDN layer: single-token sequences (the first n_single rows: all of a decode pass) through
 * the step kernel, each longer one through the chunked delta rule. */
static int
gdn_layer (DcpCudaForward *s, const Pass *p, const DcpCudaLayer *L, guint gi)
{
  const DcpCudaProj *in = &L->in_proj;
  int total = in->rows[0] + in->rows[1] + in->rows[2] + in->rows[3];
  float *dst[4] = { s->qkv, s->z, s->b, s->a };
  float *part[4];
  gsize conv_dim = s->n->conv_dim, vd = s->n->vd, hv = s->n->hv, row = p->n_single;
  gsize n_single = p->n_single;
  int col = 0;

  /* proj holds [qkv | z | b | a] per row; the kernels want each contiguous over rows (one
   * row is that already). */
  TRY (proj_rows (s, p, in, s->h, s->proj, s->gu));
  for (guint i = 0; i < 4; i++)
    {
      if (p->n_rows == 1)
        part[i] = s->proj + col;
      else
        {
          part[i] = dst[i];
          TRY (dcpk_memcpy2d_d2d_async (dst[i], (gsize) in->rows[i] * sizeof (float),
                                        s->proj + col, (gsize) total * sizeof (float),
                                        (gsize) in->rows[i] * sizeof (float), (gsize) p->n_rows,
                                        s->stream));
        }
      col += in->rows[i];
    }
  /* a verify item's inputs, before the step kernel overwrites its q|k|v with the conv's */
  for (guint i = 0, r = 0; i < p->n_seqs; r += p->seqs[i++].n_tokens)
    {
      const DcpCudaSeq *q = &p->seqs[i];

      if (q->save == NULL)
        continue;
      TRY (dcpk_memcpy_d2d_async (q->save->qkv[gi] + (gsize) q->save_row * conv_dim,
                                  part[0] + (gsize) r * conv_dim,
                                  (gsize) q->n_tokens * conv_dim * sizeof (float), s->stream));
      TRY (dcpk_memcpy_d2d_async (q->save->b[gi] + (gsize) q->save_row * hv,
                                  part[2] + (gsize) r * hv,
                                  (gsize) q->n_tokens * hv * sizeof (float), s->stream));
      TRY (dcpk_memcpy_d2d_async (q->save->a[gi] + (gsize) q->save_row * hv,
                                  part[3] + (gsize) r * hv,
                                  (gsize) q->n_tokens * hv * sizeof (float), s->stream));
    }
  if (n_single > 0)
    TRY (dcpk_gdn_decode (&s->n->gdn_shape, &L->gdn, (int) n_single, part[0], part[1], part[2],
                          part[3], s->d_ptrs + (gsize) gi * n_single,
                          s->d_ptrs + ((gsize) s->n->n_gdn + gi) * n_single, s->mix, s->stream));
  for (guint i = p->n_single; i < p->n_seqs; i++)
    {
      const DcpCudaSeq *q = &p->seqs[i];

      TRY (dcpk_gdn_prefill (&s->n->gdn_shape, &L->gdn, (int) q->n_tokens,
                             s->qkv + row * conv_dim, s->z + row * vd, s->b + row * hv,
                             s->a + row * hv, q->conv[gi], q->recurrent[gi], s->mix + row * vd,
                             s->gdn_ws, s->stream));
      row += q->n_tokens;
    }
  return matmul (s, p, &L->out, s->mix, s->delta);
}

/* Attention over the paged cache: decode attention (one query row per sequence) in a decode
 * pass, prefill attention in a prompt pass. */
static int
attend (DcpCudaForward *s, const Pass *p, void *pages)
{
  const DcpModelConfig *c = &s->w->config;
  int nh = (int) c->n_heads, hd = (int) c->head_dim, B = (int) p->n_rows;
  float scale = 1.0f / sqrtf ((float) hd);
  const gint32 *in = s->d_in;

  if (p->kind == DCP_CUDA_PASS_PROMPT)
    return dcpk_attention_prefill (&s->kv_layout, nh, scale, pages, in + s->at.pptr,
                                   in + s->at.indices, in + s->at.last, (int) p->n_seqs,
                                   in + s->at.qptr, B, (int) p->max_q, (int) p->max_kv, s->qg,
                                   s->mix, s->prefill_ws, s->stream);
  if (hd == 64 || hd == 128 || hd == 256)
    return dcpk_attention_decode (&s->kv_layout, nh, scale, pages, in + s->at.pptr,
                                  in + s->at.indices, in + s->at.last, B, NULL, B,
                                  (int) p->kv_bucket, s->qg, s->mix, s->decode_ws, s->stream);
  return dcpk_attention_decode_simple (&s->kv_layout, nh, scale, pages, in + s->at.pptr,
                                       in + s->at.indices, in + s->at.last, B, s->qg, s->mix,
                                       s->stream);
}

static int
attention_layer (DcpCudaForward *s, const Pass *p, const DcpCudaLayer *L, guint ai)
{
  const DcpModelConfig *c = &s->w->config;
  int nh = (int) c->n_heads, nkv = (int) c->n_kv_heads, hd = (int) c->head_dim;
  int M = (int) p->n_rows;
  long qrow = 2L * nh * hd, krow = (long) nkv * hd;
  float eps = (float) c->rms_norm_eps;
  void *pages = dcp_cuda_kv_layer (s->kv, ai);

  TRY (matmul (s, p, &L->q, s->h, s->qg));
  TRY (matmul (s, p, &L->k, s->h, s->k));
  TRY (matmul (s, p, &L->v, s->h, s->v));
  TRY (dcpk_head_rms_norm (s->qg, M, nh, qrow, 2L * hd, hd, L->q_norm, eps, s->stream));
  TRY (dcpk_head_rms_norm (s->k, M, nkv, krow, hd, hd, L->k_norm, eps, s->stream));
  /* Text rows have T = H = W, where the 3-D rotary is the plain one over T (the first row of
   * positions): passes without an image's rows keep the plain kernel. */
  if (p->mrope)
    {
      TRY (dcpk_rope_3d (s->qg, M, nh, qrow, 2L * hd, (int) c->rotary_dim, s->rope.inv_freq,
                         s->rope.attention_factor, (const int *) c->mrope_section,
                         s->d_in + s->at.pos, (long) s->max_rows, s->stream));
      TRY (dcpk_rope_3d (s->k, M, nkv, krow, hd, (int) c->rotary_dim, s->rope.inv_freq,
                         s->rope.attention_factor, (const int *) c->mrope_section,
                         s->d_in + s->at.pos, (long) s->max_rows, s->stream));
    }
  else
    {
      TRY (dcpk_rope (s->qg, M, nh, qrow, 2L * hd, (int) c->rotary_dim, s->rope.inv_freq,
                      s->rope.attention_factor, s->d_in + s->at.pos, s->stream));
      TRY (dcpk_rope (s->k, M, nkv, krow, hd, (int) c->rotary_dim, s->rope.inv_freq,
                      s->rope.attention_factor, s->d_in + s->at.pos, s->stream));
    }
  TRY (dcpk_kv_append (&s->kv_layout, pages, s->k, s->v, s->d_in + s->at.slots, M, s->stream));
  TRY (attend (s, p, pages));
  return matmul (s, p, &L->o, s->mix, s->delta);
}

/* The output stage: the final norm of the output rows into h's first rows, their logits.
 * When every row is an output (a decode pass, a pass of decode rows) the residual rows are
 * normed where they are; otherwise the asked-for rows are gathered first: x's into out_h,
 * delta's into h, in output order (the norm may write over its addend, not its residual). */
static int
outputs (DcpCudaForward *s, const Pass *p, const float *add)
{
  const DcpCudaWeights *w = s->w;
  const DcpModelConfig *c = &w->config;
  gsize H = c->hidden_size, row = 0;
  float eps = (float) c->rms_norm_eps;
  const float *res = s->x;
  guint n = 0;

  if (p->n_out < p->n_rows)
    {
      for (guint i = 0; i < p->n_seqs; i++)
        {
          const DcpCudaSeq *q = &p->seqs[i];
          gsize first = q->all_rows ? row : row + q->n_tokens - 1;
          gsize count = q->no_rows ? 0 : q->all_rows ? q->n_tokens : 1;

          if (count > 0)
            {
              TRY (dcpk_memcpy_d2d_async (s->out_h + n * H, s->x + first * H,
                                          count * H * sizeof (float), s->stream));
              if (add != NULL)
                TRY (dcpk_memcpy_d2d_async (s->h + n * H, s->delta + first * H,
                                            count * H * sizeof (float), s->stream));
              n += (guint) count;
            }
          row += q->n_tokens;
        }
      res = s->out_h;
      add = add != NULL ? s->h : NULL;
    }
  if (p->n_out == 0)
    return 0;
  TRY (dcpk_add_rms_norm ((float *) res, add, w->norm, (int) p->n_out, (int) H, eps, s->h,
                          s->stream));
  for (guint r = 0; r < p->n_out; r += DCPK_GEMV_MAX_BATCH)
    TRY (dcpk_gemv (w->lm_head.format, w->lm_head.data, w->lm_head.rows, w->lm_head.cols,
                    s->h + r * H, (int) MIN (DCPK_GEMV_MAX_BATCH, p->n_out - r),
                    s->logits + (gsize) r * c->vocab_size, s->stream));
  return 0;
}

/* Whether a sequence of the pass taps layer l. */
static gboolean
tapped (const Pass *p, guint l)
{
  for (guint i = 0; i < p->n_seqs; i++)
    for (guint j = 0; j < p->seqs[i].n_tap_layers; j++)
      if (p->seqs[i].tap_layers[j] == l)
        return TRUE;
  return FALSE;
}

/* The rows of src (the pass's hidden states after layer l) to the taps of layer l. */
static int
copy_taps (DcpCudaForward *s, const Pass *p, guint l, const float *src)
{
  gsize H = s->w->config.hidden_size, row = 0;

  for (guint i = 0; i < p->n_seqs; i++)
    {
      const DcpCudaSeq *q = &p->seqs[i];

      for (guint j = 0; j < q->n_tap_layers; j++)
        if (q->tap_layers[j] == l)
          TRY (dcpk_memcpy2d_d2h_async (q->taps + j * H, q->n_tap_layers * H * sizeof (float),
                                        src + row * H, H * sizeof (float), H * sizeof (float),
                                        q->n_tokens, s->stream));
      row += q->n_tokens;
    }
  return 0;
}

/* The rows the sequences give in place of their tokens' embeddings into x, a run of rows
 * adjacent in host memory (an image's) in one copy. */
static int
embedding_rows (DcpCudaForward *s, const Pass *p)
{
  gsize H = s->w->config.hidden_size, row = 0;

  for (guint i = 0; i < p->n_seqs; row += p->seqs[i++].n_tokens)
    {
      const DcpCudaSeq *q = &p->seqs[i];

      for (guint t = 0, run; q->embeddings != NULL && t < q->n_tokens; t += MAX (run, 1))
        {
          const float *first = q->embeddings[t];

          for (run = 0;
               first != NULL && t + run < q->n_tokens && q->embeddings[t + run] == first + run * H;
               run++)
            ;
          if (run > 0)
            TRY (dcpk_memcpy_h2d_async (s->x + (row + t) * H, first, run * H * sizeof (float),
                                        s->stream));
        }
    }
  return 0;
}

/* The layer walker: the whole pass on the stream (what a decode graph captures). */
static int
enqueue (DcpCudaForward *s, const Pass *p)
{
  const DcpCudaWeights *w = s->w;
  const DcpModelConfig *c = &w->config;
  int H = (int) c->hidden_size, I = (int) c->intermediate_size, M = (int) p->n_rows;
  float eps = (float) c->rms_norm_eps;
  const float *add = NULL;
  guint gi = 0, ai = 0;

  TRY (dcpk_embed (w->embed, (int) c->vocab_size, H, s->d_in + s->at.tokens, M, s->x,
                   s->stream));
  TRY (embedding_rows (s, p));
  for (guint l = 0; l < c->n_layers; l++)
    {
      const DcpCudaLayer *L = &w->layers[l];

      /* x += delta of the previous block (fused), h = norm (x) */
      TRY (dcpk_add_rms_norm (s->x, add, L->input_norm, M, H, eps, s->h, s->stream));
      if (L->is_full_attention)
        TRY (attention_layer (s, p, L, ai++));
      else
        TRY (gdn_layer (s, p, L, gi++));
      TRY (dcpk_add_rms_norm (s->x, s->delta, L->post_norm, M, H, eps, s->h, s->stream));
      TRY (proj_rows (s, p, &L->gate_up, s->h, s->gu, s->proj));
      TRY (dcpk_swiglu (s->gu, M, I, s->act, s->stream));
      TRY (matmul (s, p, &L->down, s->act, s->delta));
      add = s->delta;
      if (tapped (p, l))
        {
          /* the residual add here rather than fused into the next norm, so that x is the
           * layer's output; h gets its final norm: the tap after the last layer */
          TRY (dcpk_add_rms_norm (s->x, add, w->norm, M, H, eps, s->h, s->stream));
          add = NULL;
          TRY (copy_taps (s, p, l, l + 1 == c->n_layers ? s->h : s->x));
        }
    }
  return outputs (s, p, add);
}

/* A decode pass: replayed from its graph (captured on first use), or enqueued kernel by
 * kernel when graphs are off or a capture failed. */
static gboolean
launch_decode (DcpCudaForward *self, const Pass *p, GError **error)
{
  void **graph;
  int err;

  gboolean one_off = FALSE;

  /* a graph would hold the copies of the given rows */
  for (guint i = 0; i < p->n_seqs; i++)
    one_off |= p->seqs[i].save != NULL || p->seqs[i].embeddings != NULL ||
               p->seqs[i].n_tap_layers > 0 || p->mrope;
  if (!self->graphs_enabled || one_off)
    return dcp_cuda_check (enqueue (self, p), "decode step", error);
  graph = &self->graphs[p->n_rows][bucket_index (MAX (p->kv_bucket, 512))];
  if (*graph == NULL)
    {
      err = dcpk_graph_begin (self->stream);
      if (err == 0)
        {
          err = enqueue (self, p);
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
          return dcp_cuda_check (enqueue (self, p), "decode step", error);
        }
    }
  return dcp_cuda_check (dcpk_graph_launch (*graph, self->stream), "graph launch", error);
}

/* The pass's rows, outputs and page indices; FALSE (an error) when they are over what the
 * kind takes. */
static gboolean
count_pass (DcpCudaForward *self, Pass *p, gsize *n_indices, GError **error)
{
  for (guint i = 0; i < p->n_seqs; i++)
    {
      const DcpCudaSeq *q = &p->seqs[i];

      g_return_val_if_fail (q->n_tokens >= 1, FALSE);
      p->n_rows += q->n_tokens;
      p->n_out += q->no_rows ? 0 : q->all_rows ? q->n_tokens : 1;
      *n_indices += dcp_cuda_kv_pages_for (q->pos + q->n_tokens);
      /* single-token sequences come first: the GDN step kernel takes them as one batch */
      if (q->n_tokens == 1 && p->n_single == i)
        p->n_single++;
    }
  if (self->kv == NULL)
    *n_indices = 0;
  if (p->kind == DCP_CUDA_PASS_DECODE)
    {
      g_return_val_if_fail (p->n_seqs <= DCP_CUDA_DECODE_ROWS && p->n_rows == p->n_seqs, FALSE);
      /* every row of a decode pass is an output (its graph does not depend on the asking) */
      p->n_out = p->n_rows;
      return TRUE;
    }
  g_return_val_if_fail (self->prompt_rows > 0, FALSE);
  if (p->n_rows > self->prompt_rows || p->n_out > DCP_CUDA_PROMPT_MAX_OUT)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "prompt pass of %u rows and %u outputs is over %u and %u", p->n_rows, p->n_out,
                   self->prompt_rows, DCP_CUDA_PROMPT_MAX_OUT);
      return FALSE;
    }
  return TRUE;
}

/* The prefill attention's workspace for this pass (grown between passes). */
static gboolean
reserve_prefill_ws (DcpCudaForward *self, const Pass *p, GError **error)
{
  gsize ws = dcpk_attention_prefill_workspace_bytes (&self->kv_layout,
                                                     (int) self->w->config.n_heads,
                                                     (int) p->n_seqs, (int) p->n_rows,
                                                     (int) p->max_q, (int) p->max_kv);

  if (ws <= self->prefill_ws_bytes)
    return TRUE;
  if (self->prefill_ws != NULL &&
      !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "prefill", error))
    return FALSE;
  device_free (self, self->prefill_ws);
  self->prefill_ws_bytes = 0;
  if (!(self->prefill_ws = device_alloc (self, ws, error)))
    return FALSE;
  self->prefill_ws_bytes = ws;
  return TRUE;
}

gboolean
dcp_cuda_forward_run (DcpCudaForward *self, DcpCudaPassKind kind, const DcpCudaSeq *seqs,
                      guint n_seqs, GError **error)
{
  const DcpCudaCounts *n = self->n;
  Pass p = { .kind = kind, .seqs = seqs, .n_seqs = n_seqs };
  gsize n_indices = 0, row = 0, in_used;

  g_return_val_if_fail (n_seqs >= 1, FALSE);
  g_return_val_if_fail (self->kv != NULL || n->n_attn == 0, FALSE);
  if (!count_pass (self, &p, &n_indices, error) || !reserve_inputs (self, n_indices, error))
    return FALSE;
  for (guint i = 0; i < n_seqs; i++)
    {
      p.mrope |= seqs[i].positions != NULL;
      for (guint t = 0; t < seqs[i].n_tokens; t++)
        self->h_in[self->at.tokens + row++] = (gint32) seqs[i].tokens[t];
    }
  for (guint g = 0; g < n->n_gdn; g++)
    for (guint i = 0; i < p.n_single; i++)
      {
        self->h_ptrs[(gsize) g * p.n_single + i] = seqs[i].conv[g];
        self->h_ptrs[((gsize) n->n_gdn + g) * p.n_single + i] = seqs[i].recurrent[g];
      }
  in_used = self->at.indices;
  if (n->n_attn > 0)
    {
      p.max_kv = dcp_cuda_forward_tables (seqs, n_seqs, self->h_in + self->at.pos, self->max_rows,
                                          self->h_in + self->at.slots, self->h_in + self->at.qptr,
                                          self->h_in + self->at.pptr, self->h_in + self->at.indices,
                                          self->h_in + self->at.last, &p.max_q);
      in_used += (gsize) self->h_in[self->at.pptr + n_seqs];
      if (kind == DCP_CUDA_PASS_DECODE)
        p.kv_bucket = dcp_cuda_forward_kv_bucket (p.max_kv);
      else if (!reserve_prefill_ws (self, &p, error))
        return FALSE;
    }
  if (p.kv_bucket > self->max_kv_bucket)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY, "KV length %u is over the pool's %u",
                   p.kv_bucket, self->max_kv_bucket);
      return FALSE;
    }
  if (!dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_in, self->h_in, in_used * sizeof (gint32),
                                              self->stream), "forward inputs", error))
    return FALSE;
  if (p.n_single > 0 && n->n_gdn > 0 &&
      !dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_ptrs, self->h_ptrs,
                                              2 * (gsize) n->n_gdn * p.n_single *
                                              sizeof (float *), self->stream),
                       "forward inputs", error))
    return FALSE;
  if (kind == DCP_CUDA_PASS_DECODE)
    return launch_decode (self, &p, error);
  return dcp_cuda_check (enqueue (self, &p), "prompt pass", error);
}

static int
gdn_keep (DcpCudaForward *s, const DcpCudaRowSave *save, guint n_keep)
{
  const DcpCudaCounts *n = s->n;
  guint gi = 0;

  for (guint l = 0; l < s->w->config.n_layers; l++)
    {
      const DcpCudaLayer *L = &s->w->layers[l];

      if (L->is_full_attention)
        continue;
      /* z only gates the output, which nobody reads: the activations' z serves */
      if (n_keep > 1 && s->gdn_ws != NULL)
        TRY (dcpk_gdn_prefill (&n->gdn_shape, &L->gdn, (int) n_keep, save->qkv[gi], s->z,
                               save->b[gi], save->a[gi], s->h_ptrs[gi], s->h_ptrs[n->n_gdn + gi],
                               s->mix, s->gdn_ws, s->stream));
      else
        for (guint r = 0; r < n_keep; r++)
          TRY (dcpk_gdn_decode (&n->gdn_shape, &L->gdn, 1, save->qkv[gi] + (gsize) r * n->conv_dim,
                                s->z, save->b[gi] + (gsize) r * n->hv,
                                save->a[gi] + (gsize) r * n->hv, s->d_ptrs + gi,
                                s->d_ptrs + n->n_gdn + gi, s->mix, s->stream));
      gi++;
    }
  return 0;
}

gboolean
dcp_cuda_forward_gdn_keep (DcpCudaForward *self, const DcpCudaRowSave *save, float *const *conv,
                           float *const *recurrent, guint n_keep, GError **error)
{
  const DcpCudaCounts *n = self->n;

  g_return_val_if_fail (n_keep <= self->max_rows, FALSE);
  if (n_keep == 0 || n->n_gdn == 0)
    return TRUE;
  /* the states' pointers as a pass of one single-token sequence lays them out */
  for (guint g = 0; g < n->n_gdn; g++)
    {
      self->h_ptrs[g] = conv[g];
      self->h_ptrs[n->n_gdn + g] = recurrent[g];
    }
  return dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_ptrs, self->h_ptrs,
                                                2 * (gsize) n->n_gdn * sizeof (float *),
                                                self->stream),
                         "state keep", error) &&
         dcp_cuda_check (gdn_keep (self, save, n_keep), "state keep", error) &&
         dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state keep", error);
}

float *
dcp_cuda_forward_logits (DcpCudaForward *self, guint row)
{
  return self->logits + (gsize) row * self->w->config.vocab_size;
}

const float *
dcp_cuda_forward_hidden (DcpCudaForward *self, guint row)
{
  return self->h + (gsize) row * self->w->config.hidden_size;
}
