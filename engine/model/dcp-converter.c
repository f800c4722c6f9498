/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-converter"

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dcp-checkpoint.h"
#include "dcp-converter.h"
#include "dcp-drafter-config.h"
#include "dcp-error.h"
#include "dcp-float16.h"
#include "dcp-model-writer.h"
#include "dcp-quant.h"

#define SLICE_ELEMENTS (4u << 20)   /* FP32 elements converted per slice: 16 MiB */
#define PLACEHOLDER_SHA256 "0000000000000000000000000000000000000000000000000000000000000000"

/* The shards' SHA-256, a few threads taking shards in turn (GChecksum hashes about 0.4 GB/s on
 * one core, too slow for a 54 GB checkpoint on its own). */
typedef struct {
  DcpCheckpoint *ckpt;
  char **sha256;            /* per shard */
  gint next;
  GMutex lock;
  GError *error;
} HashJob;
/* Quantization of one slice, split by rows over a thread pool. */
typedef struct {
  DcpDType dtype;
  const DcpTensorView *view;  /* the source matrix */
  guint64 first_row;          /* of the slice in it */
  float *src;                 /* the slice in FP32, filled by the parts */
  guint64 rows, cols;
  guint8 *dst;
  GMutex lock;
  GCond done;
  guint pending;
} Slice;

typedef struct {
  Slice *slice;
  guint64 row_begin, n_rows;
} SlicePart;

typedef struct {
  const DcpConvertOptions *options;
  DcpCheckpoint *ckpt;
  DcpModelWriter *writer;
  GThreadPool *pool;
  guint n_threads;
  float *f32;
  guint64 f32_size;
  guint8 *buf;
  gsize buf_size;
  guint64 done_in, total_in;
  gint64 start_us, last_report_us;
  GArray *kept; /* guint: the checkpoint's tensors that go in the file, in order */
  JsonNode *acceptance; /* a drafter's "acceptance" member; NULL: null */
} Converter;

/* The k-th tensor written (the file's tensor k). */
static const DcpCheckpointTensor *
kept_tensor (const Converter *c, guint k)
{
  return dcp_checkpoint_get_tensor (c->ckpt, g_array_index (c->kept, guint, k));
}

static gpointer
hash_shards (gpointer data)
{
  HashJob *job = data;
  guint n = dcp_checkpoint_get_n_shards (job->ckpt);
  guint s;

  while ((s = (guint) g_atomic_int_add (&job->next, 1)) < n)
    {
      GError *error = NULL;
      job->sha256[s] = dcp_checkpoint_hash_shard (job->ckpt, s, &error);
      if (error != NULL)
        {
          g_mutex_lock (&job->lock);
          if (job->error == NULL)
            job->error = error;
          else
            g_error_free (error);
          g_mutex_unlock (&job->lock);
        }
    }
  return NULL;
}

static void
to_f32 (const DcpTensorView *v, guint64 first, guint64 n, float *out)
{
  const guint8 *p = v->data;

  switch (v->dtype)
    {
    case DCP_DTYPE_F32:
      memcpy (out, p + 4 * first, 4 * n);
      break;
    case DCP_DTYPE_BF16:
      for (guint64 i = 0; i < n; i++)
        {
          guint16 h;
          guint32 bits;
          memcpy (&h, p + 2 * (first + i), 2);
          bits = (guint32) GUINT16_FROM_LE (h) << 16;
          memcpy (&out[i], &bits, 4);
        }
      break;
    case DCP_DTYPE_F16:
      for (guint64 i = 0; i < n; i++)
        {
          guint16 h;
          memcpy (&h, p + 2 * (first + i), 2);
          out[i] = dcp_f16_to_f32 (GUINT16_FROM_LE (h));
        }
      break;
    default:
      g_assert_not_reached ();
    }
}

static void
quantize_part (gpointer data, gpointer user_data G_GNUC_UNUSED)
{
  SlicePart *part = data;
  Slice *s = part->slice;

  to_f32 (s->view, (s->first_row + part->row_begin) * s->cols, part->n_rows * s->cols, s->src + part->row_begin * s->cols);
  dcp_quantize_rows (s->dtype, s->src + part->row_begin * s->cols, s->rows, s->cols,
                     part->row_begin, part->n_rows, 1.0f, s->dst);
  g_mutex_lock (&s->lock);
  if (--s->pending == 0)
    g_cond_signal (&s->done);
  g_mutex_unlock (&s->lock);
  g_free (part);
}

/* Converts rows [first_row, first_row + rows) of a matrix to FP32 in src and quantizes them as a
 * standalone tensor into dst, in parallel by rows. */
static void
quantize_slice (Converter *c, DcpDType dtype, const DcpTensorView *view, guint64 first_row, float *src,
                guint64 rows, guint64 cols, guint8 *dst)
{
  Slice s = { dtype, view, first_row, src, rows, cols, dst, { 0 }, { 0 }, 0 };
  guint64 per = MAX ((rows + c->n_threads - 1) / c->n_threads, 1);

  g_mutex_init (&s.lock);
  g_cond_init (&s.done);
  g_mutex_lock (&s.lock);
  for (guint64 r = 0; r < rows; r += per)
    {
      SlicePart *part = g_new (SlicePart, 1);
      part->slice = &s;
      part->row_begin = r;
      part->n_rows = MIN (per, rows - r);
      s.pending++;
      g_thread_pool_push (c->pool, part, NULL);
    }
  while (s.pending > 0)
    g_cond_wait (&s.done, &s.lock);
  g_mutex_unlock (&s.lock);
  g_mutex_clear (&s.lock);
  g_cond_clear (&s.done);
}

static void
report (Converter *c, const char *name, gboolean last)
{
  gint64 now = g_get_monotonic_time ();
  double secs = (now - c->start_us) / 1e6;

  if (!c->options->progress || (!last && now - c->last_report_us < 500000))
    return;
  c->last_report_us = now;
  fprintf (stderr, "%s[%3.0f%%] %6.2f / %.2f GB read, %.2f GB/s  %-48s%s",
           isatty (STDERR_FILENO) ? "\r" : "",
           c->total_in ? 100.0 * c->done_in / c->total_in : 100.0, c->done_in / 1e9, c->total_in / 1e9,
           secs > 0 ? c->done_in / 1e9 / secs : 0.0, name,
           isatty (STDERR_FILENO) && !last ? "" : "\n");
}

/* Plain to plain: copied when the format is the same, else converted through FP32. */
static gboolean
write_plain (Converter *c, guint index, const DcpTensorView *v, DcpDType dtype, GError **error)
{
  guint out_size = dcp_dtype_plain_size (dtype);

  for (guint64 first = 0; first < v->n_elements; first += SLICE_ELEMENTS)
    {
      guint64 n = MIN (SLICE_ELEMENTS, v->n_elements - first);
      const void *bytes = c->buf;

      if (dtype == v->dtype)
        bytes = v->data + first * out_size;
      else
        {
          to_f32 (v, first, n, c->f32);
          if (dtype == DCP_DTYPE_F32)
            bytes = c->f32;
          else
            for (guint64 i = 0; i < n; i++)
              {
                guint16 h = GUINT16_TO_LE (dtype == DCP_DTYPE_BF16 ? dcp_f32_to_bf16 (c->f32[i]) : dcp_f32_to_f16 (c->f32[i]));
                memcpy (c->buf + 2 * i, &h, 2);
              }
        }
      if (!dcp_model_writer_write (c->writer, index, first * out_size, bytes, n * out_size, error))
        return FALSE;
      c->done_in += n * dcp_dtype_plain_size (v->dtype);
      report (c, v->name, FALSE);
    }
  return TRUE;
}

/* A matrix to a block format, a slice of rows at a time: each slice is quantized as a small
 * tensor of its own (rows are independent), and its two planes are written where the whole
 * tensor's planes hold those rows. */
static gboolean
write_block (Converter *c, guint index, const DcpTensorView *v, DcpDType dtype, GError **error)
{
  guint64 rows = v->shape[0], cols = v->shape[1];
  guint64 step = MAX (SLICE_ELEMENTS / MAX (cols, 1) / 8 * 8, 8);
  DcpQuantLayout whole, part;
  static const guint8 zeros[16] = { 0 };
  guint64 gap;

  if (!dcp_quant_layout (dtype, rows, cols, &whole))
    g_return_val_if_reached (FALSE);
  for (guint64 r = 0; r < rows; r += step)
    {
      guint64 n = MIN (step, rows - r);
      guint64 plane = n * whole.row_bytes, scales = n * whole.blocks_per_row;

      if (!dcp_quant_layout (dtype, n, cols, &part))
        g_return_val_if_reached (FALSE);
      if (part.total_bytes > c->buf_size)
        {
          g_free (c->buf);
          c->buf_size = part.total_bytes;
          c->buf = g_malloc (c->buf_size);
        }
      if (n * cols > c->f32_size)
        {
          g_free (c->f32);
          c->f32_size = n * cols;
          c->f32 = g_new (float, c->f32_size);
        }
      quantize_slice (c, dtype, v, r, c->f32, n, cols, c->buf);
      if (!dcp_model_writer_write (c->writer, index, r * whole.row_bytes, c->buf, plane, error) ||
          !dcp_model_writer_write (c->writer, index, whole.scales_offset + r * whole.blocks_per_row,
                                   c->buf + part.scales_offset, scales, error))
        return FALSE;
      c->done_in += n * cols * dcp_dtype_plain_size (v->dtype);
      report (c, v->name, FALSE);
    }
  /* The zero bytes between the element plane and the scale plane. */
  gap = whole.scales_offset - rows * whole.row_bytes;
  g_assert (gap < sizeof zeros);
  return gap == 0 || dcp_model_writer_write (c->writer, index, rows * whole.row_bytes, zeros, gap, error);
}

/* A copy of a JSON object without one member. */
static JsonNode *
copy_without (JsonNode *node, const char *member)
{
  JsonNode *copy = json_node_new (JSON_NODE_OBJECT);
  JsonObject *o = json_object_new ();
  JsonObjectIter iter;
  const char *key;
  JsonNode *value;

  json_object_iter_init (&iter, json_node_get_object (node));
  while (json_object_iter_next (&iter, &key, &value))
    if (!g_str_equal (key, member))
      json_object_set_member (o, key, json_node_copy (value));
  json_node_take_object (copy, o);
  return copy;
}

/* A group's format: the recipe's, but for the vision tower where the options choose. */
static DcpDType
group_dtype (const DcpConvertOptions *o, DcpTensorGroup group)
{
  if (group == DCP_GROUP_VISION && o->vision == DCP_CONVERT_VISION_BF16)
    return DCP_DTYPE_BF16;
  if (group == DCP_GROUP_VISION && o->vision == DCP_CONVERT_VISION_FP8)
    return DCP_DTYPE_MXFP8_E4M3;
  return dcp_recipe_group_dtype (o->recipe, group);
}

/* The metadata's "source": where the checkpoint came from and its files (sha256 per shard,
 * or zeros when not hashed). */
static void
add_source (JsonBuilder *b, const Converter *c, char **sha256)
{
  const DcpConvertOptions *o = c->options;
  g_autofree char *folder = g_path_get_basename (o->input_dir);

  json_builder_set_member_name (b, "source");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "model_id");
  json_builder_add_string_value (b, o->model_id ? o->model_id : folder);
  json_builder_set_member_name (b, "revision");
  if (o->revision)
    json_builder_add_string_value (b, o->revision);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "files");
  json_builder_begin_array (b);
  for (guint s = 0; s < dcp_checkpoint_get_n_shards (c->ckpt); s++)
    {
      g_autofree char *base = g_path_get_basename (dcp_checkpoint_get_shard_path (c->ckpt, s));
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, base);
      json_builder_set_member_name (b, "bytes");
      json_builder_add_int_value (b, dcp_checkpoint_get_shard_size (c->ckpt, s));
      json_builder_set_member_name (b, "sha256");
      json_builder_add_string_value (b, sha256 ? sha256[s] : PLACEHOLDER_SHA256);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}

static JsonNode *
build_metadata (Converter *c, const DcpDType *dtypes, const guint64 *sizes, guint64 file_size, char **sha256,
                JsonNode *accuracy)
{
  DcpCheckpoint *ckpt = c->ckpt;
  const DcpConvertOptions *o = c->options;
  const DcpModelConfig *config = dcp_checkpoint_get_config (ckpt);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  guint64 component[DCP_COMPONENT_N] = { 0 }, total = 0;
  gboolean has_mtp = FALSE, has_vision = FALSE;
  gboolean drop_vision = o->vision == DCP_CONVERT_VISION_OFF;

  for (guint i = 0; i < c->kept->len; i++)
    {
      const char *name = kept_tensor (c, i)->name;
      component[dcp_tensor_component (name)] += sizes[i];
      total += sizes[i];
      has_mtp |= dcp_tensor_component (name) == DCP_COMPONENT_MTP;
      has_vision |= dcp_tensor_component (name) == DCP_COMPONENT_VISION;
    }

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architecture");
  json_builder_add_string_value (b, "qwen3_5");
  /* Without the tower the config has no vision_config either: the engine then reads the file as
   * a model without one (images are refused saying so). */
  json_builder_set_member_name (b, "config");
  json_builder_add_value (
      b, drop_vision ? copy_without (dcp_checkpoint_get_config_json (ckpt), "vision_config")
                     : json_node_copy (dcp_checkpoint_get_config_json (ckpt)));

  json_builder_set_member_name (b, "parts");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "layer_types");
  json_builder_begin_array (b);
  for (guint l = 0; l < config->n_layers; l++)
    json_builder_add_string_value (b, config->is_full_attention[l] ? "full_attention" : "linear_attention");
  json_builder_end_array (b);
  json_builder_set_member_name (b, "mtp");
  json_builder_add_boolean_value (b, has_mtp);
  json_builder_set_member_name (b, "vision");
  json_builder_add_boolean_value (b, has_vision);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "chat_template");
  if (dcp_checkpoint_get_chat_template (ckpt))
    json_builder_add_string_value (b, dcp_checkpoint_get_chat_template (ckpt));
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "tokenizer_config");
  json_builder_add_value (b, copy_without (dcp_checkpoint_get_tokenizer_config (ckpt), "chat_template"));
  json_builder_set_member_name (b, "generation");
  if (dcp_checkpoint_get_generation (ckpt))
    json_builder_add_value (b, json_node_copy (dcp_checkpoint_get_generation (ckpt)));
  else
    json_builder_add_null_value (b);

  json_builder_set_member_name (b, "preprocessor");
  if (dcp_checkpoint_get_preprocessor (ckpt) && !drop_vision)
    json_builder_add_value (b, json_node_copy (dcp_checkpoint_get_preprocessor (ckpt)));
  else
    json_builder_add_null_value (b);

  json_builder_set_member_name (b, "recipe");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, dcp_recipe_name (o->recipe));
  json_builder_set_member_name (b, "groups");
  json_builder_begin_object (b);
  for (guint g = 0; g < DCP_GROUP_KEEP; g++)
    {
      json_builder_set_member_name (b, dcp_tensor_group_name (g));
      json_builder_add_string_value (b, dcp_dtype_name (group_dtype (o, g)));
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "tensors");
  json_builder_begin_object (b);
  for (guint i = 0; i < c->kept->len; i++)
    {
      json_builder_set_member_name (b, kept_tensor (c, i)->name);
      json_builder_add_string_value (b, dcp_dtype_name (dtypes[i]));
    }
  json_builder_end_object (b);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "sizes");
  json_builder_begin_object (b);
  for (guint k = 0; k < DCP_COMPONENT_N; k++)
    {
      json_builder_set_member_name (b, dcp_component_name (k));
      json_builder_add_int_value (b, component[k]);
    }
  json_builder_set_member_name (b, "gpu_weights");  /* what a GPU holds: text layers + lm_head */
  json_builder_add_int_value (b, component[DCP_COMPONENT_TEXT] + component[DCP_COMPONENT_LM_HEAD]);
  json_builder_set_member_name (b, "tensors");
  json_builder_add_int_value (b, total);
  json_builder_set_member_name (b, "file");
  json_builder_add_int_value (b, file_size);
  json_builder_end_object (b);

  add_source (b, c, sha256);

  /* null unless measured (options->measure), so that no number is ever invented */
  json_builder_set_member_name (b, "accuracy");
  if (accuracy != NULL)
    json_builder_add_value (b, json_node_copy (accuracy));
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "converter");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "program");
  json_builder_add_string_value (b, "decapybara-convert");
  json_builder_set_member_name (b, "version");
  json_builder_add_string_value (b, PACKAGE_VERSION);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* A DFlash drafter's metadata (docs/FORMAT.md "Drafter files"): its kind, target and taps in
 * "drafter", its own config.json as "config", and the recipe, sizes and source as for a model. */
static JsonNode *
build_drafter_metadata (Converter *c, const DcpDType *dtypes, const guint64 *sizes, guint64 file_size, char **sha256)
{
  DcpCheckpoint *ckpt = c->ckpt;
  const DcpConvertOptions *o = c->options;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  guint64 layers = 0, total = 0;

  for (guint i = 0; i < c->kept->len; i++)
    {
      total += sizes[i];
      if (g_str_has_prefix (kept_tensor (c, i)->name, "layers."))
        layers += sizes[i];
    }

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architecture");
  json_builder_add_string_value (b, "dflash");
  json_builder_set_member_name (b, "drafter");
  json_builder_add_value (b, dcp_drafter_config_to_json (dcp_checkpoint_get_drafter (ckpt),
                                                         o->target_name, c->acceptance));
  json_builder_set_member_name (b, "config");
  json_builder_add_value (b, json_node_copy (dcp_checkpoint_get_config_json (ckpt)));

  json_builder_set_member_name (b, "recipe");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, dcp_recipe_name (o->recipe));
  json_builder_set_member_name (b, "groups");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "drafter");
  json_builder_add_string_value (b, dcp_dtype_name (dcp_recipe_group_dtype (o->recipe, DCP_GROUP_MTP)));
  json_builder_end_object (b);
  json_builder_set_member_name (b, "tensors");
  json_builder_begin_object (b);
  for (guint i = 0; i < c->kept->len; i++)
    {
      json_builder_set_member_name (b, kept_tensor (c, i)->name);
      json_builder_add_string_value (b, dcp_dtype_name (dtypes[i]));
    }
  json_builder_end_object (b);
  json_builder_end_object (b);

  /* layers: the decoder layers; the rest is fc, hidden_norm and norm */
  json_builder_set_member_name (b, "sizes");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "layers");
  json_builder_add_int_value (b, layers);
  json_builder_set_member_name (b, "gpu_weights");
  json_builder_add_int_value (b, total);
  json_builder_set_member_name (b, "tensors");
  json_builder_add_int_value (b, total);
  json_builder_set_member_name (b, "file");
  json_builder_add_int_value (b, file_size);
  json_builder_end_object (b);

  add_source (b, c, sha256);

  json_builder_set_member_name (b, "accuracy");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "converter");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "program");
  json_builder_add_string_value (b, "decapybara-convert");
  json_builder_set_member_name (b, "version");
  json_builder_add_string_value (b, PACKAGE_VERSION);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static gsize
json_size (JsonNode *node)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autofree char *text = NULL;
  gsize len = 0;

  json_generator_set_root (gen, node);
  text = json_generator_to_data (gen, &len);
  return len;
}

static gboolean
convert (Converter *c, GError **error)
{
  guint n = c->kept->len;
  g_autofree DcpDType *dtypes = g_new (DcpDType, n);
  g_autofree guint64 *sizes = g_new (guint64, n);
  g_autoptr(JsonNode) plan = NULL, metadata = NULL;
  guint n_shards = dcp_checkpoint_get_n_shards (c->ckpt);
  g_autoptr(GPtrArray) sha256 = g_ptr_array_new_full (n_shards, g_free);
  HashJob job = { c->ckpt, NULL, 0, { 0 }, NULL };
  GThread *hashers[8];
  guint n_hashers = CLAMP (MIN (n_shards, c->n_threads / 2), 1, G_N_ELEMENTS (hashers));
  gboolean ok = TRUE;
  gboolean drafter = dcp_checkpoint_get_drafter (c->ckpt) != NULL;

  if (drafter && c->options->measure != NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "--measure measures a model, not a DFlash drafter (its acceptance needs its target)");
      return FALSE;
    }
  if (c->options->acceptance_stats != NULL)
    {
      if (!drafter)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "--acceptance records a DFlash drafter's acceptance; this is a model");
          return FALSE;
        }
      c->acceptance = dcp_drafter_acceptance_from_stats (dcp_checkpoint_get_drafter (c->ckpt),
                                                         c->options->acceptance_stats, error);
      if (c->acceptance == NULL)
        return FALSE;
    }
  for (guint i = 0; i < n; i++)
    {
      const DcpCheckpointTensor *t = kept_tensor (c, i);
      /* a drafter's matrices take the recipe's MTP format: both are small draft heads */
      if (drafter && t->view->ndim == 2)
        dtypes[i] = dcp_recipe_group_dtype (c->options->recipe, DCP_GROUP_MTP);
      else if (dcp_tensor_group (t->name, t->view->ndim) == DCP_GROUP_VISION)
        dtypes[i] = group_dtype (c->options, DCP_GROUP_VISION);
      else
        dtypes[i] = dcp_recipe_tensor_dtype (c->options->recipe, t->name, t->view->ndim,
                                             t->view->dtype);
      if (dcp_model_writer_add_tensor (c->writer, t->name, dtypes[i], t->view->shape, t->view->ndim, error) < 0)
        return FALSE;
      sizes[i] = dcp_model_writer_get_tensor_bytes (c->writer, i);
      c->total_in += t->view->nbytes;
    }
  /* The metadata is written last (it holds the shards' hashes); keep room for it now. The
   * placeholders have the final values' lengths, so 4 KiB of slack covers the file size; a
   * measured accuracy object (five KV settings of three numbers) takes well under 4 KiB more. */
  plan = drafter ? build_drafter_metadata (c, dtypes, sizes, G_MAXINT64, NULL)
                 : build_metadata (c, dtypes, sizes, G_MAXINT64, NULL, NULL);
  if (!dcp_model_writer_begin (c->writer, dcp_checkpoint_get_tokenizer (c->ckpt),
                               json_size (plan) + (c->options->measure ? 8192 : 4096), error))
    return FALSE;

  g_ptr_array_set_size (sha256, n_shards);
  job.sha256 = (char **) sha256->pdata;
  g_mutex_init (&job.lock);
  for (guint h = 0; h < n_hashers; h++)
    hashers[h] = g_thread_new ("dcp-sha256", hash_shards, &job);
  for (guint i = 0; i < n && ok; i++)
    {
      const DcpTensorView *v = kept_tensor (c, i)->view;
      ok = dcp_dtype_is_block (dtypes[i]) ? write_block (c, i, v, dtypes[i], error)
                                          : write_plain (c, i, v, dtypes[i], error);
    }
  for (guint h = 0; h < n_hashers; h++)
    g_thread_join (hashers[h]);
  g_mutex_clear (&job.lock);
  if (!ok)
    {
      g_clear_error (&job.error);
      return FALSE;
    }
  if (job.error != NULL)
    {
      g_propagate_error (error, job.error);
      return FALSE;
    }
  report (c, "", TRUE);
  if (drafter)
    metadata = build_drafter_metadata (c, dtypes, sizes, dcp_model_writer_get_file_size (c->writer), (char **) sha256->pdata);
  else
    metadata = build_metadata (c, dtypes, sizes, dcp_model_writer_get_file_size (c->writer), (char **) sha256->pdata, NULL);
  if (c->options->measure != NULL)
    {
      g_autoptr(JsonNode) accuracy = NULL;

      if (!dcp_model_writer_seal (c->writer, metadata, error))
        return FALSE;
      accuracy = c->options->measure (dcp_model_writer_get_temp_path (c->writer), c->options->measure_data, error);
      if (accuracy == NULL)
        return FALSE;
      json_node_unref (metadata);
      metadata = build_metadata (c, dtypes, sizes, dcp_model_writer_get_file_size (c->writer),
                                 (char **) sha256->pdata, accuracy);
    }
  return dcp_model_writer_finish (c->writer, metadata, error);
}

gboolean
dcp_convert (const DcpConvertOptions *options, DcpConvertStats *stats, GError **error)
{
  g_autoptr(DcpCheckpoint) ckpt = NULL;
  g_autoptr(DcpModelWriter) writer = NULL;
  Converter c = { 0 };
  gboolean ok;

  g_return_val_if_fail (options != NULL && options->input_dir != NULL && options->output_path != NULL, FALSE);
  g_return_val_if_fail (options->recipe < DCP_RECIPE_N, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  c.start_us = g_get_monotonic_time ();
  ckpt = dcp_checkpoint_open (options->input_dir, options->tokenizer_dir, error);
  if (ckpt == NULL)
    return FALSE;
  writer = dcp_model_writer_new (options->output_path, error);
  if (writer == NULL)
    return FALSE;

  c.options = options;
  c.ckpt = ckpt;
  c.writer = writer;
  c.kept = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < dcp_checkpoint_get_n_tensors (ckpt); i++)
    if (options->vision != DCP_CONVERT_VISION_OFF ||
        dcp_tensor_component (dcp_checkpoint_get_tensor (ckpt, i)->name) != DCP_COMPONENT_VISION)
      g_array_append_val (c.kept, i);
  c.n_threads = options->n_threads ? options->n_threads : MAX (g_get_num_processors (), 1);
  c.pool = g_thread_pool_new (quantize_part, NULL, c.n_threads, FALSE, NULL);
  c.f32_size = SLICE_ELEMENTS;
  c.f32 = g_new (float, c.f32_size);
  c.buf_size = 4 * (gsize) SLICE_ELEMENTS;
  c.buf = g_malloc (c.buf_size);
  ok = convert (&c, error);
  g_thread_pool_free (c.pool, FALSE, TRUE);
  g_free (c.f32);
  g_free (c.buf);
  g_clear_pointer (&c.acceptance, json_node_unref);

  if (ok && stats != NULL)
    {
      stats->bytes_in = c.total_in;
      stats->bytes_out = dcp_model_writer_get_file_size (writer);
      stats->n_tensors = c.kept->len;
      stats->seconds = (g_get_monotonic_time () - c.start_us) / 1e6;
    }
  g_array_unref (c.kept);
  return ok;
}
