/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-weights"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cuda-error.h"
#include "dcp-cuda-weights.h"
#include "dcp-float16.h"
#include "dcp-quant.h"
#include "dcp-recipe.h"

gboolean
dcp_cuda_format_of (DcpDType dtype, DcpkFormat *format)
{
  switch (dtype)
    {
    case DCP_DTYPE_BF16: *format = DCPK_FORMAT_BF16; return TRUE;
    case DCP_DTYPE_MXFP8_E4M3: *format = DCPK_FORMAT_MXFP8_E4M3; return TRUE;
    case DCP_DTYPE_MXFP6_E2M3: *format = DCPK_FORMAT_MXFP6_E2M3; return TRUE;
    case DCP_DTYPE_MXFP6_E3M2: *format = DCPK_FORMAT_MXFP6_E3M2; return TRUE;
    case DCP_DTYPE_MXFP4_E2M1: *format = DCPK_FORMAT_MXFP4_E2M1; return TRUE;
    default: return FALSE;
    }
}

static DcpDType
dtype_of (DcpkFormat format)
{
  switch (format)
    {
    case DCPK_FORMAT_MXFP8_E4M3: return DCP_DTYPE_MXFP8_E4M3;
    case DCPK_FORMAT_MXFP6_E2M3: return DCP_DTYPE_MXFP6_E2M3;
    case DCPK_FORMAT_MXFP6_E3M2: return DCP_DTYPE_MXFP6_E3M2;
    case DCPK_FORMAT_MXFP4_E2M1: return DCP_DTYPE_MXFP4_E2M1;
    case DCPK_FORMAT_BF16:
    default: return DCP_DTYPE_BF16;
    }
}

/* Device memory owned by the weights, padded to 16 bytes (what dcpk_checksum reads). */
static gpointer
device_alloc (DcpCudaWeights *w, gsize bytes, const char *what, GError **error)
{
  void *d = NULL;
  gsize padded = (bytes + 15) & ~(gsize) 15;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (padded, 16)), what, error))
    return NULL;
  g_ptr_array_add (w->allocations, d);
  w->device_bytes += padded;
  return d;
}

/* Uploads host bytes and checks the device copy's checksum against the host's. */
static gpointer
upload (DcpCudaWeights *w, const char *name, const void *host, gsize bytes, GError **error)
{
  gsize padded = (bytes + 15) & ~(gsize) 15;
  g_autofree guint8 *staging = NULL;
  const void *src = host;
  guint64 want, got = 0;
  gpointer d = device_alloc (w, bytes, name, error);

  if (d == NULL)
    return NULL;
  if (padded != bytes || padded == 0)
    {
      staging = g_malloc0 (MAX (padded, 16));
      memcpy (staging, host, bytes);
      src = staging;
      padded = MAX (padded, 16);
    }
  if (!dcp_cuda_check (dcpk_memcpy_h2d (d, src, padded), name, error) ||
      !dcp_cuda_check (dcpk_checksum (d, padded, &got), name, error))
    return NULL;
  want = dcpk_checksum_ref (src, padded);
  if (got != want)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_DEVICE,
                   "tensor “%s”: the VRAM copy's checksum %016" G_GINT64_MODIFIER "x differs from "
                   "the file's %016" G_GINT64_MODIFIER "x", name, got, want);
      return NULL;
    }
  return d;
}

/* A matrix as the GEMV reads it, in host memory. */
typedef struct {
  DcpkFormat format;
  int rows, cols;
  const guint8 *bytes;
  gsize nbytes;
  guint8 *owned;
  const DcpTensorView *view;     /* where it came from */
  const char *name;              /* its canonical name (borrowed) */
} HostMatrix;

/* Part h of a matrix uploaded at d (fused: its element rows at elem_offset, its scale rows
 * scale_offset into the stacked scale plane at scales_at). */
static void
record_matrix (DcpCudaWeights *w, const HostMatrix *h, const guint8 *d, gsize elem_offset,
               gsize scales_at, gsize scale_offset, gboolean fused)
{
  DcpQuantLayout l;
  DcpCudaStoredTensor t = { g_strdup (h->name), 2, { NULL, NULL }, { 0, 0 }, 0 };

  if (h->owned != NULL)
    {
      g_free (t.name);
      dcp_cuda_stored_add_converted (w->stored, h->name, h->view);
      return;
    }
  dcp_quant_layout (dtype_of (h->format), (guint64) h->rows, (guint64) h->cols, &l);
  if (!fused || h->format == DCPK_FORMAT_BF16)
    {
      g_free (t.name);
      dcp_cuda_stored_add_range (w->stored, h->name, d + elem_offset,
                                 fused ? l.row_bytes * h->rows : h->nbytes);
      return;
    }
  t.data[0] = d + elem_offset;
  t.nbytes[0] = l.row_bytes * h->rows;
  t.data[1] = d + scales_at + scale_offset;
  t.nbytes[1] = l.blocks_per_row * h->rows;
  t.file_offset[1] = l.scales_offset;
  g_array_append_val (w->stored, t);
}

static void
host_matrix_clear (HostMatrix *m)
{
  g_clear_pointer (&m->owned, g_free);
}

/* Any plain tensor's n elements as FP32. */
static float *
plain_to_f32 (const DcpTensorView *view, GError **error)
{
  float *v;

  if (view->dtype != DCP_DTYPE_F32 && view->dtype != DCP_DTYPE_F16 && view->dtype != DCP_DTYPE_BF16)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "tensor “%s”: %s is not read by the "
                   "CUDA backend here", view->name, dcp_dtype_name (view->dtype));
      return NULL;
    }
  if (view->nbytes != dcp_quant_tensor_bytes (view->dtype, 1, view->n_elements))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "tensor “%s”: %" G_GUINT64_FORMAT
                   " bytes for %" G_GUINT64_FORMAT " elements", view->name, view->nbytes,
                   view->n_elements);
      return NULL;
    }
  v = g_new (float, MAX (view->n_elements, 1));
  dcp_dequantize_rows (view->dtype, view->data, 1, view->n_elements, 0, 1, v);
  return v;
}

static guint16 *
f32_to_bf16 (const float *v, gsize n)
{
  guint16 *h = g_new (guint16, MAX (n, 1));

  for (gsize i = 0; i < n; i++)
    h[i] = GUINT16_TO_LE (dcp_f32_to_bf16 (v[i]));
  return h;
}

static gboolean
host_matrix (const DcpTensorSource *source, const char *name, guint64 rows, guint64 cols,
             HostMatrix *m, GError **error)
{
  guint64 shape[2] = { rows, cols };
  const DcpTensorView *view = dcp_tensor_source_require (source, name, 2, shape, error);

  memset (m, 0, sizeof *m);
  if (view == NULL)
    return FALSE;
  m->view = view;
  m->name = name;
  m->rows = (int) rows;
  m->cols = (int) cols;
  if (dcp_cuda_format_of (view->dtype, &m->format))
    {
      if (view->nbytes != dcp_quant_tensor_bytes (view->dtype, rows, cols))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                       "tensor “%s”: %" G_GUINT64_FORMAT " bytes, %s needs %" G_GUINT64_FORMAT,
                       name, view->nbytes, dcp_dtype_name (view->dtype),
                       dcp_quant_tensor_bytes (view->dtype, rows, cols));
          return FALSE;
        }
      m->bytes = view->data;
      m->nbytes = view->nbytes;
      return TRUE;
    }
  else
    {
      g_autofree float *v = plain_to_f32 (view, error);

      if (v == NULL)
        return FALSE;
      m->format = DCPK_FORMAT_BF16;
      m->owned = (guint8 *) f32_to_bf16 (v, rows * cols);
      m->bytes = m->owned;
      m->nbytes = rows * cols * 2;
      return TRUE;
    }
}

static gboolean
upload_matrix (DcpCudaWeights *w, const char *name, const HostMatrix *h, DcpCudaMatrix *m,
               GError **error)
{
  m->format = h->format;
  m->rows = h->rows;
  m->cols = h->cols;
  m->data = upload (w, name, h->bytes, h->nbytes, error);
  w->gemv_bytes += h->nbytes;
  return m->data != NULL;
}

static gboolean
matrix (DcpCudaWeights *w, const DcpTensorSource *source, const char *name, guint64 rows,
        guint64 cols, DcpCudaMatrix *m, GError **error)
{
  HostMatrix h;
  gboolean ok = host_matrix (source, name, rows, cols, &h, error) &&
                upload_matrix (w, name, &h, m, error);

  if (ok)
    record_matrix (w, &h, m->data, 0, 0, 0, FALSE);
  host_matrix_clear (&h);
  return ok;
}

guint8 *
dcp_cuda_weights_fuse (DcpDType dtype, const guint8 *const *parts, const int *rows, guint n,
                       int cols, gsize *nbytes)
{
  DcpQuantLayout all;
  guint8 *out;
  guint64 elem = 0, scale = 0, total_rows = 0;

  for (guint i = 0; i < n; i++)
    total_rows += (guint64) rows[i];
  dcp_quant_layout (dtype, total_rows, (guint64) cols, &all);
  out = g_malloc0 (MAX (all.total_bytes, 1));
  for (guint i = 0; i < n; i++)
    {
      DcpQuantLayout part;

      dcp_quant_layout (dtype, (guint64) rows[i], (guint64) cols, &part);
      memcpy (out + elem, parts[i], part.row_bytes * rows[i]);
      elem += part.row_bytes * rows[i];
      if (dtype != DCP_DTYPE_BF16)
        {
          memcpy (out + all.scales_offset + scale, parts[i] + part.scales_offset,
                  part.blocks_per_row * rows[i]);
          scale += part.blocks_per_row * rows[i];
        }
    }
  *nbytes = all.total_bytes;
  return out;
}

/* The n parts h[0..n) (one format) stacked into the matrix m, each recorded for the checksum. */
static gboolean
upload_run (DcpCudaWeights *w, const char *name, const HostMatrix *h, guint n, DcpCudaMatrix *m,
            GError **error)
{
  HostMatrix all = { h[0].format, 0, h[0].cols, NULL, 0, NULL };
  const guint8 *bytes[DCP_CUDA_MAX_PARTS];
  int rows[DCP_CUDA_MAX_PARTS];
  DcpQuantLayout l;
  gsize elem = 0, scale = 0;
  gboolean ok;

  if (n == 1)
    {
      ok = upload_matrix (w, name, &h[0], m, error);
      if (ok)
        record_matrix (w, &h[0], m->data, 0, 0, 0, FALSE);
      return ok;
    }
  for (guint i = 0; i < n; i++)
    {
      bytes[i] = h[i].bytes;
      rows[i] = h[i].rows;
      all.rows += h[i].rows;
    }
  all.owned = dcp_cuda_weights_fuse (dtype_of (all.format), bytes, rows, n, all.cols, &all.nbytes);
  all.bytes = all.owned;
  ok = upload_matrix (w, name, &all, m, error);
  host_matrix_clear (&all);
  if (!ok)
    return FALSE;
  dcp_quant_layout (dtype_of (all.format), (guint64) all.rows, (guint64) all.cols, &l);
  for (guint i = 0; i < n; i++)
    {
      DcpQuantLayout part;

      record_matrix (w, &h[i], m->data, elem, l.scales_offset, scale, TRUE);
      dcp_quant_layout (dtype_of (h[i].format), (guint64) h[i].rows, (guint64) h[i].cols, &part);
      elem += part.row_bytes * h[i].rows;
      scale += part.blocks_per_row * h[i].rows;
    }
  return TRUE;
}

static gboolean
proj (DcpCudaWeights *w, const DcpTensorSource *source, const char *const *names,
      const guint64 *rows, guint n, guint64 cols, DcpCudaProj *p, GError **error)
{
  HostMatrix h[DCP_CUDA_MAX_PARTS];
  gboolean ok = TRUE;
  guint loaded = 0;

  p->n_parts = n;
  p->n_runs = 0;
  for (guint i = 0; i < n && ok; i++, loaded++)
    {
      ok = host_matrix (source, names[i], rows[i], cols, &h[i], error);
      p->rows[i] = (int) rows[i];
    }
  for (guint first = 0, end; ok && first < n; first = end)
    {
      for (end = first + 1; end < n && h[end].format == h[first].format; end++)
        ;
      ok = upload_run (w, names[first], h + first, end - first, &p->runs[p->n_runs++], error);
    }
  for (guint i = 0; i < loaded; i++)
    host_matrix_clear (&h[i]);
  return ok;
}

static gpointer
vector (DcpCudaWeights *w, const DcpTensorSource *source, const char *name, guint64 n,
        gboolean bf16, GError **error)
{
  const DcpTensorView *view = dcp_tensor_source_lookup (source, name);
  g_autofree float *v = NULL;
  g_autofree guint16 *h = NULL;
  gpointer d;

  if (view == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "tensor “%s” is missing", name);
      return NULL;
    }
  if (view->n_elements != n)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “%s”: %" G_GUINT64_FORMAT " elements, the model config needs %"
                   G_GUINT64_FORMAT, name, view->n_elements, n);
      return NULL;
    }
  if ((v = plain_to_f32 (view, error)) == NULL)
    return NULL;
  if (!bf16)
    d = upload (w, name, v, n * sizeof (float), error);
  else
    {
      h = f32_to_bf16 (v, n);
      d = upload (w, name, h, n * 2, error);
    }
  if (d != NULL && view->dtype == (bf16 ? DCP_DTYPE_BF16 : DCP_DTYPE_F32))
    dcp_cuda_stored_add_range (w->stored, name, d, view->nbytes);
  else if (d != NULL)
    dcp_cuda_stored_add_converted (w->stored, name, view);
  return d;
}

/* The embedding table as BF16, dequantized row block by row block when stored otherwise. */
static guint16 *
embedding (DcpCudaWeights *w, const DcpTensorSource *source, const DcpModelConfig *c,
           GError **error)
{
  guint64 V = c->vocab_size, H = c->hidden_size;
  guint64 shape[2] = { V, H };
  const DcpTensorView *view = dcp_tensor_source_require (source, "embed_tokens.weight", 2, shape, error);
  g_autofree guint16 *table = NULL;
  g_autofree float *block = NULL;
  const guint64 rows_per_block = 256;

  if (view == NULL)
    return NULL;
  if (view->nbytes != dcp_quant_tensor_bytes (view->dtype, V, H) ||
      view->dtype == DCP_DTYPE_NVFP4)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “embed_tokens.weight”: %" G_GUINT64_FORMAT " bytes for %s",
                   view->nbytes, dcp_dtype_name (view->dtype));
      return NULL;
    }
  if (view->dtype == DCP_DTYPE_BF16)
    {
      guint16 *d = upload (w, "embed_tokens.weight", view->data, view->nbytes, error);

      if (d != NULL)
        dcp_cuda_stored_add_range (w->stored, "embed_tokens.weight", d, view->nbytes);
      return d;
    }
  dcp_cuda_stored_add_converted (w->stored, "embed_tokens.weight", view);
  table = g_new (guint16, V * H);
  block = g_new (float, rows_per_block * H);
  for (guint64 r = 0; r < V; r += rows_per_block)
    {
      guint64 n = MIN (rows_per_block, V - r);

      dcp_dequantize_rows (view->dtype, view->data, V, H, r, n, block);
      for (guint64 i = 0; i < n * H; i++)
        table[r * H + i] = GUINT16_TO_LE (dcp_f32_to_bf16 (block[i]));
    }
  return upload (w, "embed_tokens.weight", table, V * H * 2, error);
}

#define NAME(...) (g_free (name), name = g_strdup_printf (__VA_ARGS__))

/* The layer whose tensors are named prefix.* ("layers.3", "mtp.layers.0"). */
static gboolean
upload_layer (DcpCudaWeights *w, const DcpTensorSource *s, const char *prefix,
              gboolean full_attention, DcpCudaLayer *L, GError **error)
{
  const DcpModelConfig *c = &w->config;
  g_autofree char *name = NULL;
  guint64 H = c->hidden_size, I = c->intermediate_size;
  char *mlp_names[2];
  guint64 mlp_rows[2] = { I, I };
  gboolean ok;

  L->is_full_attention = full_attention;
  if (L->is_full_attention)
    {
      guint64 qd = (guint64) c->n_heads * c->head_dim, kvd = (guint64) c->n_kv_heads * c->head_dim;

      if (!matrix (w, s, NAME ("%s.self_attn.q_proj.weight", prefix), 2 * qd, H, &L->q, error) ||
          !matrix (w, s, NAME ("%s.self_attn.k_proj.weight", prefix), kvd, H, &L->k, error) ||
          !matrix (w, s, NAME ("%s.self_attn.v_proj.weight", prefix), kvd, H, &L->v, error) ||
          !matrix (w, s, NAME ("%s.self_attn.o_proj.weight", prefix), H, qd, &L->o, error) ||
          !(L->q_norm = vector (w, s, NAME ("%s.self_attn.q_norm.weight", prefix), c->head_dim, TRUE, error)) ||
          !(L->k_norm = vector (w, s, NAME ("%s.self_attn.k_norm.weight", prefix), c->head_dim, TRUE, error)))
        return FALSE;
    }
  else
    {
      guint64 hv = c->linear_n_value_heads, vd = hv * c->linear_value_head_dim;
      guint64 conv_dim = 2 * (guint64) c->linear_n_key_heads * c->linear_key_head_dim + vd;
      guint64 rows[4] = { conv_dim, vd, hv, hv };
      char *names[4];

      names[0] = g_strdup_printf ("%s.linear_attn.in_proj_qkv.weight", prefix);
      names[1] = g_strdup_printf ("%s.linear_attn.in_proj_z.weight", prefix);
      names[2] = g_strdup_printf ("%s.linear_attn.in_proj_b.weight", prefix);
      names[3] = g_strdup_printf ("%s.linear_attn.in_proj_a.weight", prefix);
      ok = proj (w, s, (const char *const *) names, rows, 4, H, &L->in_proj, error);
      for (guint j = 0; j < 4; j++)
        g_free (names[j]);
      if (!ok ||
          !matrix (w, s, NAME ("%s.linear_attn.out_proj.weight", prefix), H, vd, &L->out, error) ||
          !(L->gdn.conv_weight = vector (w, s, NAME ("%s.linear_attn.conv1d.weight", prefix),
                                         conv_dim * c->linear_conv_kernel, TRUE, error)) ||
          !(L->gdn.a_log = vector (w, s, NAME ("%s.linear_attn.A_log", prefix), hv, FALSE, error)) ||
          !(L->gdn.dt_bias = vector (w, s, NAME ("%s.linear_attn.dt_bias", prefix), hv, FALSE, error)) ||
          !(L->gdn.norm_weight = vector (w, s, NAME ("%s.linear_attn.norm.weight", prefix),
                                         c->linear_value_head_dim, FALSE, error)))
        return FALSE;
    }
  mlp_names[0] = g_strdup_printf ("%s.mlp.gate_proj.weight", prefix);
  mlp_names[1] = g_strdup_printf ("%s.mlp.up_proj.weight", prefix);
  ok = proj (w, s, (const char *const *) mlp_names, mlp_rows, 2, H, &L->gate_up, error);
  g_free (mlp_names[0]);
  g_free (mlp_names[1]);
  return ok &&
         matrix (w, s, NAME ("%s.mlp.down_proj.weight", prefix), H, I, &L->down, error) &&
         (L->input_norm = vector (w, s, NAME ("%s.input_layernorm.weight", prefix), H, TRUE, error)) &&
         (L->post_norm = vector (w, s, NAME ("%s.post_attention_layernorm.weight", prefix), H, TRUE, error));
}

/* The MTP head, in the formats the file stores (the recipe's mtp group); what it reads is not
 * part of a decode step's GEMV bytes. */
static gboolean
upload_mtp (DcpCudaWeights *w, const DcpTensorSource *s, GError **error)
{
  DcpCudaMtpWeights *m = &w->mtp;
  guint64 H = w->config.hidden_size, step_bytes = w->gemv_bytes;
  gboolean ok;

  ok = (m->pre_fc_norm_embedding = vector (w, s, "mtp.pre_fc_norm_embedding.weight", H, TRUE, error)) &&
       (m->pre_fc_norm_hidden = vector (w, s, "mtp.pre_fc_norm_hidden.weight", H, TRUE, error)) &&
       (m->norm = vector (w, s, "mtp.norm.weight", H, TRUE, error)) &&
       matrix (w, s, "mtp.fc.weight", H, 2 * H, &m->fc, error) &&
       upload_layer (w, s, "mtp.layers.0", TRUE, &m->layer, error);
  w->gemv_bytes = step_bytes;
  return ok;
}

static void
counts_init (DcpCudaCounts *n, const DcpModelConfig *c)
{
  for (guint l = 0; l < c->n_layers; l++)
    {
      if (c->is_full_attention[l])
        n->n_attn++;
      else
        n->n_gdn++;
    }
  n->hv = c->linear_n_value_heads;
  n->vd = n->hv * c->linear_value_head_dim;
  n->conv_dim = 2 * (gsize) c->linear_n_key_heads * c->linear_key_head_dim + n->vd;
  n->conv_floats = (gsize) (c->linear_conv_kernel - 1) * n->conv_dim;
  n->recurrent_floats = n->vd * c->linear_key_head_dim;
  n->qd = (gsize) c->n_heads * c->head_dim;
  n->kvd = (gsize) c->n_kv_heads * c->head_dim;
  n->proj_width = MAX (n->conv_dim + n->vd + 2 * n->hv, 2 * (gsize) c->intermediate_size);
  n->gdn_shape = (DcpkGdnShape) { (int) c->linear_n_key_heads, (int) c->linear_n_value_heads,
                                  (int) c->linear_key_head_dim, (int) c->linear_value_head_dim,
                                  (int) c->linear_conv_kernel, (float) c->rms_norm_eps };
}

static DcpCudaWeights *
weights_new (const DcpModelConfig *config)
{
  DcpCudaWeights *w = g_new0 (DcpCudaWeights, 1);

  w->config = *config;
  counts_init (&w->counts, config);
  w->allocations = g_ptr_array_new ();
  w->stored = dcp_cuda_stored_new ();
  w->layers = g_new0 (DcpCudaLayer, config->n_layers);
  return w;
}

DcpCudaWeights *
dcp_cuda_weights_upload (const DcpModelConfig *config, const DcpTensorSource *source,
                         GError **error)
{
  g_autoptr(DcpCudaWeights) w = NULL;
  const DcpTensorView *embed_view;

  g_return_val_if_fail (config != NULL && source != NULL, NULL);
  w = weights_new (config);
  if ((w->embed = embedding (w, source, config, error)) == NULL ||
      (w->norm = vector (w, source, "norm.weight", config->hidden_size, TRUE, error)) == NULL)
    return NULL;
  embed_view = dcp_tensor_source_lookup (source, "embed_tokens.weight");
  if (config->tie_word_embeddings && embed_view->dtype == DCP_DTYPE_BF16)
    {
      /* The table the gather reads is the head's matrix too. */
      w->lm_head = (DcpCudaMatrix) { DCPK_FORMAT_BF16, (int) config->vocab_size,
                                     (int) config->hidden_size, w->embed };
      w->gemv_bytes += embed_view->nbytes;
    }
  else if (!matrix (w, source, config->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight",
                    config->vocab_size, config->hidden_size, &w->lm_head, error))
    return NULL;
  for (guint i = 0; i < config->n_layers; i++)
    {
      g_autofree char *prefix = g_strdup_printf ("layers.%u", i);

      if (!upload_layer (w, source, prefix, config->is_full_attention[i], &w->layers[i], error))
        return NULL;
    }
  w->has_mtp = dcp_tensor_source_lookup (source, "mtp.fc.weight") != NULL;
  if (w->has_mtp && !upload_mtp (w, source, error))
    return NULL;
  return g_steal_pointer (&w);
}

DcpCudaWeights *
dcp_cuda_weights_new_set (void)
{
  DcpModelConfig none = { 0 };

  return weights_new (&none);
}

gboolean
dcp_cuda_weights_add_matrix (DcpCudaWeights *w, const DcpTensorSource *source, const char *name,
                             guint64 rows, guint64 cols, DcpCudaMatrix *m, GError **error)
{
  return matrix (w, source, name, rows, cols, m, error);
}

gboolean
dcp_cuda_weights_add_proj (DcpCudaWeights *w, const DcpTensorSource *source,
                           const char *const *names, const guint64 *rows, guint n, guint64 cols,
                           DcpCudaProj *p, GError **error)
{
  return proj (w, source, names, rows, n, cols, p, error);
}

float *
dcp_cuda_weights_add_vector (DcpCudaWeights *w, const DcpTensorSource *source, const char *name,
                             guint64 n, GError **error)
{
  return vector (w, source, name, n, FALSE, error);
}

/* ---- random weights ---- */

typedef struct {
  DcpCudaWeights *w;
  DcpkFormat formats[DCP_GROUP_N];   /* per tensor group */
  guint64 seed;
} Rand;

/* Random weights are recorded too, as ranges named random.N, so that the integrity monitor's
 * benchmark can check them (against their sums taken once filled). */
static void
record_random (DcpCudaWeights *w, const void *d, gsize nbytes)
{
  g_autofree char *name = g_strdup_printf ("random.%u", w->stored->len);

  dcp_cuda_stored_add_range (w->stored, name, d, nbytes);
}

static gboolean
rand_matrix (Rand *r, DcpTensorGroup group, int rows, int cols, DcpCudaMatrix *m, GError **error)
{
  DcpkFormat format = r->formats[group];
  DcpQuantLayout layout;
  gsize bytes = dcpk_weight_bytes (format, rows, cols);
  float a = sqrtf (3.0f / (float) cols);

  m->format = format;
  m->rows = rows;
  m->cols = cols;
  if ((m->data = device_alloc (r->w, bytes, "random weight", error)) == NULL)
    return FALSE;
  record_random (r->w, m->data, bytes);
  r->w->gemv_bytes += bytes;
  r->seed++;
  if (format == DCPK_FORMAT_BF16)
    return dcp_cuda_check (dcpk_fill_random_bf16 (m->data, (gsize) rows * cols, -a, a, r->seed),
                           "fill", error);
  dcp_quant_layout (dtype_of (format), (guint64) rows, (guint64) cols, &layout);
  /* E4M3 codes with the exponent's low bit clear cannot be NaN; E8M0 scales near 2^-6 give
   * weights of about the BF16 ones' size. */
  return dcp_cuda_check (dcpk_fill_random_bytes (m->data, layout.scales_offset,
                                                 format == DCPK_FORMAT_MXFP8_E4M3 ? 0xf7 : 0xff,
                                                 r->seed), "fill", error) &&
         dcp_cuda_check (dcpk_memset_async ((guint8 *) m->data + layout.scales_offset,
                                            format == DCPK_FORMAT_MXFP8_E4M3 ? 116 : 121,
                                            layout.total_bytes - layout.scales_offset, NULL),
                         "fill", error);
}

/* Fused as the upload fuses them: one matrix per run of parts in one format. */
static gboolean
rand_proj (Rand *r, const DcpTensorGroup *groups, const int *rows, guint n, int cols,
           DcpCudaProj *p, GError **error)
{
  p->n_parts = n;
  p->n_runs = 0;
  for (guint i = 0; i < n; i++)
    p->rows[i] = rows[i];
  for (guint first = 0, end; first < n; first = end)
    {
      int total = rows[first];

      for (end = first + 1; end < n && r->formats[groups[end]] == r->formats[groups[first]]; end++)
        total += rows[end];
      if (!rand_matrix (r, groups[first], total, cols, &p->runs[p->n_runs++], error))
        return FALSE;
    }
  return TRUE;
}

static gpointer
rand_vector (Rand *r, gsize n, gboolean bf16, float lo, float hi, GError **error)
{
  gpointer d = device_alloc (r->w, n * (bf16 ? 2 : 4), "random vector", error);

  r->seed++;
  if (d == NULL)
    return NULL;
  record_random (r->w, d, n * (bf16 ? 2 : 4));
  if (!dcp_cuda_check (bf16 ? dcpk_fill_random_bf16 (d, n, lo, hi, r->seed)
                            : dcpk_fill_random_f32 (d, n, lo, hi, r->seed), "fill", error))
    return NULL;
  return d;
}

/* One random decoder layer; every matrix of an MTP layer in the recipe's mtp group. */
static gboolean
rand_layer (Rand *r, gboolean full_attention, gboolean mtp, DcpCudaLayer *L, GError **error)
{
  static const DcpTensorGroup gdn_groups[4] = {
    DCP_GROUP_GDN_QKV, DCP_GROUP_GDN_Z, DCP_GROUP_GDN_AB, DCP_GROUP_GDN_AB
  };
  static const DcpTensorGroup mlp_groups[2] = { DCP_GROUP_MLP_GATE_UP, DCP_GROUP_MLP_GATE_UP };
  static const DcpTensorGroup mtp_groups[2] = { DCP_GROUP_MTP, DCP_GROUP_MTP };
  const DcpModelConfig *config = &r->w->config;
  int H = (int) config->hidden_size, I = (int) config->intermediate_size;
  int mlp_rows[2] = { I, I };

  L->is_full_attention = full_attention;
  if (L->is_full_attention)
    {
      int qd = (int) (config->n_heads * config->head_dim);
      int kvd = (int) (config->n_kv_heads * config->head_dim);
      DcpTensorGroup qkv = mtp ? DCP_GROUP_MTP : DCP_GROUP_ATTN_QKV;

      if (!rand_matrix (r, qkv, 2 * qd, H, &L->q, error) ||
          !rand_matrix (r, qkv, kvd, H, &L->k, error) ||
          !rand_matrix (r, qkv, kvd, H, &L->v, error) ||
          !rand_matrix (r, mtp ? DCP_GROUP_MTP : DCP_GROUP_ATTN_O, H, qd, &L->o, error) ||
          !(L->q_norm = rand_vector (r, config->head_dim, TRUE, -0.1f, 0.1f, error)) ||
          !(L->k_norm = rand_vector (r, config->head_dim, TRUE, -0.1f, 0.1f, error)))
        return FALSE;
    }
  else
    {
      int hv = (int) config->linear_n_value_heads;
      int vd = hv * (int) config->linear_value_head_dim;
      int conv_dim = 2 * (int) (config->linear_n_key_heads * config->linear_key_head_dim) + vd;
      int rows[4] = { conv_dim, vd, hv, hv };

      if (!rand_proj (r, gdn_groups, rows, 4, H, &L->in_proj, error) ||
          !rand_matrix (r, DCP_GROUP_GDN_OUT, H, vd, &L->out, error) ||
          !(L->gdn.conv_weight = rand_vector (r, (gsize) conv_dim * config->linear_conv_kernel,
                                              TRUE, -0.5f, 0.5f, error)) ||
          !(L->gdn.a_log = rand_vector (r, hv, FALSE, -1, 1, error)) ||
          !(L->gdn.dt_bias = rand_vector (r, hv, FALSE, -1, 1, error)) ||
          !(L->gdn.norm_weight = rand_vector (r, config->linear_value_head_dim, FALSE, 0.9f,
                                              1.1f, error)))
        return FALSE;
    }
  return rand_proj (r, mtp ? mtp_groups : mlp_groups, mlp_rows, 2, H, &L->gate_up, error) &&
         rand_matrix (r, mtp ? DCP_GROUP_MTP : DCP_GROUP_MLP_DOWN, H, I, &L->down, error) &&
         (L->input_norm = rand_vector (r, H, TRUE, -0.1f, 0.1f, error)) &&
         (L->post_norm = rand_vector (r, H, TRUE, -0.1f, 0.1f, error));
}

/* The MTP head, when the config has one (not part of a decode step's GEMV bytes). */
static gboolean
rand_mtp (Rand *r, GError **error)
{
  DcpCudaWeights *w = r->w;
  DcpCudaMtpWeights *m = &w->mtp;
  int H = (int) w->config.hidden_size;
  guint64 step_bytes = w->gemv_bytes;
  gboolean ok;

  ok = (m->pre_fc_norm_embedding = rand_vector (r, H, TRUE, -0.1f, 0.1f, error)) &&
       (m->pre_fc_norm_hidden = rand_vector (r, H, TRUE, -0.1f, 0.1f, error)) &&
       (m->norm = rand_vector (r, H, TRUE, -0.1f, 0.1f, error)) &&
       rand_matrix (r, DCP_GROUP_MTP, H, 2 * H, &m->fc, error) &&
       rand_layer (r, TRUE, TRUE, &m->layer, error);
  w->gemv_bytes = step_bytes;
  w->has_mtp = ok;
  return ok;
}

static DcpCudaWeights *
random_weights (const DcpModelConfig *config, const DcpkFormat *formats, guint64 seed,
                GError **error)
{
  g_autoptr(DcpCudaWeights) w = weights_new (config);
  Rand r = { w, { 0 }, seed };
  int H = (int) config->hidden_size;

  memcpy (r.formats, formats, sizeof r.formats);
  if (!(w->embed = rand_vector (&r, (gsize) config->vocab_size * H, TRUE, -1, 1, error)) ||
      !(w->norm = rand_vector (&r, H, TRUE, -0.1f, 0.1f, error)) ||
      !rand_matrix (&r, DCP_GROUP_LM_HEAD, (int) config->vocab_size, H, &w->lm_head, error))
    return NULL;
  for (guint i = 0; i < config->n_layers; i++)
    if (!rand_layer (&r, config->is_full_attention[i], FALSE, &w->layers[i], error))
      return NULL;
  if (config->mtp_n_layers > 0 && !rand_mtp (&r, error))
    return NULL;
  if (!dcp_cuda_check (dcpk_synchronize (), "fill", error))
    return NULL;
  return g_steal_pointer (&w);
}

DcpCudaWeights *
dcp_cuda_weights_random_recipe (const DcpModelConfig *config, DcpRecipe recipe, guint64 seed,
                                GError **error)
{
  DcpkFormat formats[DCP_GROUP_N] = { 0 };

  g_return_val_if_fail (config != NULL && recipe < DCP_RECIPE_N, NULL);
  for (guint g = 0; g < DCP_GROUP_KEEP; g++)
    if (!dcp_cuda_format_of (dcp_recipe_group_dtype (recipe, g), &formats[g]))
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "recipe %s: %s (%s) is not a GEMV "
                     "format", dcp_recipe_name (recipe), dcp_tensor_group_name (g),
                     dcp_dtype_name (dcp_recipe_group_dtype (recipe, g)));
        return NULL;
      }
  return random_weights (config, formats, seed, error);
}

void
dcp_cuda_weights_free (DcpCudaWeights *self)
{
  if (self == NULL)
    return;
  for (guint i = 0; i < self->allocations->len; i++)
    dcpk_free (self->allocations->pdata[i]);
  g_ptr_array_unref (self->allocations);
  dcp_cuda_stored_free (self->stored);
  g_free (self->layers);
  g_free (self);
}

int
dcp_cuda_proj_rows (const DcpCudaProj *p, DcpCudaMatmulFn mul, gpointer user, const float *x,
                    int rows, float *out, float *tmp, void *stream)
{
  int total = 0, col = 0, err;

  if (p->n_runs == 1 || rows == 1)
    {
      /* One row: each run's output is already where it goes. */
      for (guint i = 0; i < p->n_runs; i++)
        {
          if ((err = mul (user, &p->runs[i], x, rows, out + col)) != 0)
            return err;
          col += p->runs[i].rows;
        }
      return 0;
    }
  for (guint i = 0; i < p->n_parts; i++)
    total += p->rows[i];
  for (guint i = 0; i < p->n_runs; i++)
    {
      const DcpCudaMatrix *m = &p->runs[i];

      if ((err = mul (user, m, x, rows, tmp)) != 0 ||
          (err = dcpk_memcpy2d_d2d_async (out + col, (gsize) total * sizeof (float), tmp,
                                          (gsize) m->rows * sizeof (float),
                                          (gsize) m->rows * sizeof (float), (gsize) rows,
                                          stream)) != 0)
        return err;
      col += m->rows;
    }
  return 0;
}
