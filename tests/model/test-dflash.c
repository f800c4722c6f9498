/* SPDX-License-Identifier: MIT */
/* The DFlash block drafter: the committed random checkpoint (tests/models/make-dflash-drafter.py)
 * converted to a drafter file and read back; its CPU forward against the numpy reference's
 * logits (within 1e-4) through a context that grows and is cut back; the target's tapped hidden
 * states; and the errors of checkpoints, files and pairings that do not fit, each naming its
 * field. */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-converter.h"
#include "dcp-drafter-model.h"
#include "dcp-error.h"
#include "dcp-model-file.h"
#include "dcp-model-writer.h"
#include "dcp-safetensors.h"

static char *
model_dir (const char *name)
{
  return g_test_build_filename (G_TEST_DIST, "data", "models", name, NULL);
}

static void
remove_dir (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *p = g_build_filename (path, name, NULL);
      g_unlink (p);
    }
  g_rmdir (path);
}

/* Converts a checkpoint folder; the error, if any, goes to error. */
static gboolean
convert (const char *input, const char *output, DcpRecipe recipe, GError **error)
{
  DcpConvertOptions options = { .input_dir = input, .output_path = output, .recipe = recipe,
                                .target_name = "test/odd-sizes", .n_threads = 2 };
  return dcp_convert (&options, NULL, error);
}

/* The committed drafter, converted (bf16) into a temporary folder; returns the file's path. */
static char *
converted_drafter (char **tmpdir)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *input = model_dir ("dflash-odd");
  char *out;

  *tmpdir = g_dir_make_tmp ("dcp-dflash-XXXXXX", &error);
  g_assert_no_error (error);
  out = g_build_filename (*tmpdir, "drafter.mcapy", NULL);
  convert (input, out, DCP_RECIPE_BF16, &error);
  g_assert_no_error (error);
  return out;
}

static void
test_file (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = converted_drafter (&dir);
  g_autofree char *model_path = g_build_filename (dir, "model.mcapy", NULL);
  g_autofree char *odd = model_dir ("odd-sizes");
  g_autofree char *tok = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = dcp_model_file_open_drafter (path, &error);
  g_autoptr(DcpModelFile) as_model = NULL;
  const DcpDrafterConfig *c;
  JsonObject *m, *d, *t;
  DcpConvertOptions options = { .input_dir = odd, .tokenizer_dir = tok, .output_path = model_path,
                                .recipe = DCP_RECIPE_BF16, .n_threads = 2 };

  g_assert_no_error (error);
  g_assert_true (dcp_model_file_verify (file, &error));
  g_assert_no_error (error);
  c = dcp_model_file_get_drafter (file);
  g_assert_nonnull (c);
  g_assert_cmpuint (c->block_size, ==, 4);
  g_assert_cmpuint (c->mask_token_id, ==, 298);
  g_assert_cmpuint (c->n_taps, ==, 2);
  g_assert_cmpuint (c->tap_layers[0], ==, 2);
  g_assert_cmpuint (c->tap_layers[1], ==, 5);
  g_assert_cmpuint (c->n_layers, ==, 2);
  g_assert_cmpuint (c->target_hidden_size, ==, 96);
  g_assert_cmpuint (c->target_vocab_size, ==, 300);
  g_assert_cmpuint (c->target_n_layers, ==, 8);
  g_assert_cmpuint (dcp_model_file_get_n_tensors (file), ==, 3 + 2 * 11);

  /* the metadata contract the launcher reads */
  m = dcp_model_file_get_metadata (file);
  d = json_object_get_object_member (m, "drafter");
  g_assert_cmpstr (json_object_get_string_member (d, "kind"), ==, "dflash");
  g_assert_cmpint (json_object_get_int_member (d, "block_size"), ==, 4);
  g_assert_cmpint (json_object_get_int_member (d, "mask_token_id"), ==, 298);
  g_assert_true (JSON_NODE_HOLDS_NULL (json_object_get_member (d, "acceptance")));
  t = json_object_get_object_member (d, "target");
  g_assert_cmpstr (json_object_get_string_member (t, "architecture"), ==, "qwen3_5");
  g_assert_cmpstr (json_object_get_string_member (t, "name"), ==, "test/odd-sizes");
  g_assert_cmpint (json_object_get_int_member (t, "hidden_size"), ==, 96);
  g_assert_cmpint (json_object_get_int_member (t, "vocab_size"), ==, 300);
  g_assert_cmpint (json_object_get_int_member (t, "num_hidden_layers"), ==, 8);
  g_assert_cmpint (json_array_get_int_element (json_object_get_array_member (t, "layer_ids"), 1), ==, 5);
  g_assert_true (json_object_has_member (m, "config"));
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (m, "sizes"), "file"), ==,
                   dcp_model_file_get_header (file)->file_size);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (m, "recipe"), "name"), ==, "bf16");

  /* a drafter is not a model, and a model not a drafter: each says which it is */
  as_model = dcp_model_file_open (path, &error);
  g_assert_null (as_model);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "drafter"));
  g_clear_error (&error);
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  as_model = dcp_model_file_open_drafter (model_path, &error);
  g_assert_null (as_model);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "“drafter”"));
  remove_dir (dir);
}

static float *
read_floats (const char *name, gsize *n)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "models", "dflash-odd", "golden", name, NULL);
  g_autoptr(GError) error = NULL;
  char *bytes = NULL;
  gsize len = 0;

  g_file_get_contents (path, &bytes, &len, &error);
  g_assert_no_error (error);
  *n = len / sizeof (float);
  return (float *) bytes;
}

typedef struct {
  DcpCheckpoint *target_ckpt;
  DcpBackend *target;
} Target;

static void
target_open (Target *t, const char *name)
{
  g_autofree char *dir = model_dir (name);
  g_autofree char *tok = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;

  t->target_ckpt = dcp_checkpoint_open (dir, tok, &error);
  g_assert_no_error (error);
  source = dcp_checkpoint_get_source (t->target_ckpt);
  t->target = dcp_backend_cpu_new (dcp_checkpoint_get_config (t->target_ckpt), &source, 2, &error);
  g_assert_no_error (error);
}

static void
target_close (Target *t)
{
  g_clear_object (&t->target);
  g_clear_pointer (&t->target_ckpt, dcp_checkpoint_free);
}

/* Appends rows first .. first + n - 1 of the golden taps to the context. */
static void
add_rows (DcpDrafterModel *model, DcpDrafterState *state, const float *taps, guint width, guint first, guint n)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_drafter_model_add_context (model, state, taps + (gsize) first * width, n, &error));
  g_assert_no_error (error);
}

static void
check_step (DcpDrafterModel *model, DcpDrafterState *state, guint32 anchor, guint n_drafts, const float *want)
{
  g_autoptr(GError) error = NULL;
  guint V = dcp_drafter_model_get_config (model)->target_vocab_size;
  g_autofree float *logits = g_new (float, (gsize) n_drafts * V);
  guint32 drafts[16];
  float confidence[16];
  double worst = 0;

  g_assert_true (dcp_drafter_model_propose (model, state, anchor, n_drafts, drafts, confidence, logits, &error));
  g_assert_no_error (error);
  for (gsize i = 0; i < (gsize) n_drafts * V; i++)
    worst = MAX (worst, fabs ((double) logits[i] - want[i]));
  g_test_message ("anchor %u: max |logit - reference| %.3g", anchor, worst);
  g_assert_cmpfloat (worst, <, 1e-4);
  for (guint t = 0; t < n_drafts; t++)
    {
      const float *row = want + (gsize) t * V;
      guint best = 0;
      double sum = 0;

      for (guint i = 1; i < V; i++)
        best = row[i] > row[best] ? i : best;
      for (guint i = 0; i < V; i++)
        sum += exp ((double) row[i] - row[best]);
      g_assert_cmpuint (drafts[t], ==, best);
      g_assert_cmpfloat_with_epsilon (confidence[t], 1.0 / sum, 1e-5);
    }
  /* proposing leaves the context as it was */
  g_assert_cmpuint (dcp_drafter_state_get_n_tokens (state), >, 0);
}

/* The scenario of make-dflash-drafter.py (golden/steps.json): 7 context rows and anchor 17;
 * cut back to 5, rows 7..9 added, anchor 42; the same context with anchor 5 and one draft. */
static void
test_forward (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = converted_drafter (&dir);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpDrafterModel) model = NULL;
  g_autoptr(DcpDrafterState) state = NULL;
  g_autofree float *taps = NULL, *want = NULL;
  gsize n_taps = 0, n_want = 0;
  guint width, V;
  Target t = { 0 };

  target_open (&t, "odd-sizes");
  model = dcp_drafter_model_open (t.target, path, &error);
  g_assert_no_error (error);
  width = dcp_drafter_model_get_config (model)->n_taps * 96;
  V = dcp_drafter_model_get_config (model)->target_vocab_size;
  taps = read_floats ("taps.f32", &n_taps);
  want = read_floats ("logits.f32", &n_want);
  g_assert_cmpuint (n_taps, ==, 10 * width);
  g_assert_cmpuint (n_want, ==, 7 * V);

  state = dcp_drafter_state_new (model);
  add_rows (model, state, taps, width, 0, 3);   /* in two pieces: the cache grows */
  add_rows (model, state, taps, width, 3, 4);
  g_assert_cmpuint (dcp_drafter_state_get_n_tokens (state), ==, 7);
  check_step (model, state, 17, 3, want);
  g_assert_cmpuint (dcp_drafter_state_get_n_tokens (state), ==, 7);

  dcp_drafter_state_truncate (state, 5);
  add_rows (model, state, taps, width, 7, 3);
  g_assert_cmpuint (dcp_drafter_state_get_n_tokens (state), ==, 8);
  check_step (model, state, 42, 3, want + 3 * V);
  check_step (model, state, 5, 1, want + 6 * V);
  g_assert_cmpuint (dcp_drafter_state_get_bytes (state), ==, 8 * 2 * 64 * 4 * 2);

  /* bad asks */
  {
    guint32 drafts[4];
    float conf[4];

    g_assert_false (dcp_drafter_model_propose (model, state, 17, 4, drafts, conf, NULL, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_false (dcp_drafter_model_propose (model, state, 300, 1, drafts, conf, NULL, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
  }
  g_clear_pointer (&state, dcp_drafter_state_free);
  g_clear_pointer (&model, dcp_drafter_model_free);
  target_close (&t);
  remove_dir (dir);
}

/* A quantized drafter (tiny recipe: MXFP4 matrices) loads and drafts tokens of the vocabulary. */
static void
test_quantized (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *input = model_dir ("dflash-odd");
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpDrafterModel) model = NULL;
  g_autoptr(DcpDrafterState) state = NULL;
  g_autofree float *taps = NULL;
  gsize n = 0;
  g_autoptr(DcpModelFile) file = NULL;
  guint32 drafts[3];
  float conf[3];
  Target t = { 0 };

  dir = g_dir_make_tmp ("dcp-dflash-XXXXXX", &error);
  g_assert_no_error (error);
  out = g_build_filename (dir, "tiny.mcapy", NULL);
  g_assert_true (convert (input, out, DCP_RECIPE_TINY, &error));
  g_assert_no_error (error);
  target_open (&t, "odd-sizes");
  file = dcp_model_file_open_drafter (out, &error);
  g_assert_no_error (error);
  g_assert_cmpint (dcp_model_file_lookup (file, "fc.weight")->dtype, ==, DCP_DTYPE_MXFP4_E2M1);
  model = dcp_drafter_model_open (t.target, out, &error);
  g_assert_no_error (error);
  taps = read_floats ("taps.f32", &n);
  state = dcp_drafter_state_new (model);
  add_rows (model, state, taps, 192, 0, 7);
  g_assert_true (dcp_drafter_model_propose (model, state, 17, 3, drafts, conf, NULL, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < 3; i++)
    {
      g_assert_cmpuint (drafts[i], <, 300);
      g_assert_true (conf[i] > 0 && conf[i] <= 1);
    }
  g_clear_pointer (&state, dcp_drafter_state_free);
  g_clear_pointer (&model, dcp_drafter_model_free);
  target_close (&t);
  remove_dir (dir);
}

/* The target's taps: after the last layer the final-normed state (= DcpBatchItem.hidden), after
 * layer l what a model cut to l + 1 layers has before its final norm; chunked like whole. */
static void
test_taps (void)
{
  g_autofree char *dir = model_dir ("odd-sizes");
  g_autofree char *tok = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpCheckpoint) ckpt = dcp_checkpoint_open (dir, tok, &error);
  const DcpModelConfig *config;
  DcpModelConfig cut;
  DcpTensorSource source;
  g_autoptr(DcpBackend) full = NULL, part = NULL;
  const guint32 tokens[6] = { 3, 141, 59, 26, 5, 35 };
  const guint layers[2] = { 2, 7 };
  guint H = 96, n = 6;
  g_autofree float *taps = g_new0 (float, n * 2 * H), *taps2 = g_new0 (float, n * 2 * H);
  g_autofree float *hidden = g_new (float, n * H), *hidden_cut = g_new (float, n * H);
  g_autofree float *logits = g_new (float, n * 300);
  g_autofree float *normed = g_new (float, H);
  DcpSeqState *s, *s2, *s3;
  DcpBatchItem item = { 0 };
  const float *norm;

  g_assert_no_error (error);
  config = dcp_checkpoint_get_config (ckpt);
  source = dcp_checkpoint_get_source (ckpt);
  full = dcp_backend_cpu_new (config, &source, 2, &error);
  g_assert_no_error (error);
  cut = *config;
  cut.n_layers = 3;
  part = dcp_backend_cpu_new (&cut, &source, 2, &error);
  g_assert_no_error (error);

  s = dcp_backend_state_new (full, &error);
  item = (DcpBatchItem) { .state = s, .tokens = tokens, .n_tokens = n, .logits_mode = DCP_LOGITS_ALL,
                          .logits = logits, .hidden = hidden, .tap_layers = layers, .n_tap_layers = 2, .taps = taps };
  g_assert_true (dcp_backend_forward (full, &item, 1, &error));
  g_assert_no_error (error);
  for (guint t = 0; t < n; t++)
    g_assert_cmpmem (taps + (gsize) t * 2 * H + H, H * sizeof (float), hidden + (gsize) t * H, H * sizeof (float));

  s2 = dcp_backend_state_new (part, &error);
  item = (DcpBatchItem) { .state = s2, .tokens = tokens, .n_tokens = n, .logits_mode = DCP_LOGITS_ALL,
                          .logits = logits, .hidden = hidden_cut };
  g_assert_true (dcp_backend_forward (part, &item, 1, &error));
  norm = dcp_backend_cpu_get_weights (DCP_BACKEND_CPU (part))->norm;
  for (guint t = 0; t < n; t++)
    {
      dcp_cpu_rms_norm_zc (taps + (gsize) t * 2 * H, norm, H, (float) config->rms_norm_eps, normed);
      for (guint i = 0; i < H; i++)
        g_assert_cmpfloat_with_epsilon (normed[i], hidden_cut[(gsize) t * H + i], 1e-5);
    }

  /* a prompt in two chunks taps the same rows */
  s3 = dcp_backend_state_new (full, &error);
  item = (DcpBatchItem) { .state = s3, .tokens = tokens, .n_tokens = 4, .tap_layers = layers, .n_tap_layers = 2,
                          .taps = taps2 };
  g_assert_true (dcp_backend_forward (full, &item, 1, &error));
  item = (DcpBatchItem) { .state = s3, .tokens = tokens + 4, .n_tokens = 2, .tap_layers = layers, .n_tap_layers = 2,
                          .taps = taps2 + 4 * 2 * H };
  g_assert_true (dcp_backend_forward (full, &item, 1, &error));
  g_assert_no_error (error);
  for (gsize i = 0; i < (gsize) n * 2 * H; i++)
    g_assert_cmpfloat_with_epsilon (taps2[i], taps[i], 1e-4);

  /* a tap beyond the model's layers */
  {
    const guint beyond[1] = { 8 };
    item = (DcpBatchItem) { .state = s3, .tokens = tokens, .n_tokens = 1, .tap_layers = beyond, .n_tap_layers = 1,
                            .taps = taps2 };
    g_assert_false (dcp_backend_forward (full, &item, 1, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "layer 8"));
    g_assert_cmpuint (dcp_backend_state_get_n_tokens (full, s3), ==, 6);
  }
  dcp_backend_state_free (full, s);
  dcp_backend_state_free (full, s3);
  dcp_backend_state_free (part, s2);
}

/* A copy of the drafter checkpoint with config.json edited by `edit` and, with drop, without
 * that tensor; returns the folder. */
typedef void (*EditFunc) (JsonObject *config);

static void
write_without (const char *from, const char *to, const char *drop)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpSafetensors) st = dcp_safetensors_open (from, &error);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GByteArray) file = g_byte_array_new ();
  g_autofree char *header = NULL;
  guint64 at = 0, len;

  g_assert_no_error (error);
  json_builder_begin_object (b);
  for (guint i = 0; i < dcp_safetensors_get_n_tensors (st); i++)
    {
      const DcpTensorView *v = dcp_safetensors_get_tensor (st, i);
      if (g_strcmp0 (v->name, drop) == 0)
        continue;
      json_builder_set_member_name (b, v->name);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, "BF16");
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < v->ndim; d++)
        json_builder_add_int_value (b, v->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "data_offsets");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, at);
      at += v->nbytes;
      json_builder_add_int_value (b, at);
      json_builder_end_array (b);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  header = json_to_string (root, FALSE);
  len = GUINT64_TO_LE (strlen (header));
  g_byte_array_append (file, (const guint8 *) &len, 8);
  g_byte_array_append (file, (const guint8 *) header, strlen (header));
  for (guint i = 0; i < dcp_safetensors_get_n_tensors (st); i++)
    {
      const DcpTensorView *v = dcp_safetensors_get_tensor (st, i);
      if (g_strcmp0 (v->name, drop) != 0)
        g_byte_array_append (file, v->data, v->nbytes);
    }
  g_file_set_contents (to, (const char *) file->data, file->len, &error);
  g_assert_no_error (error);
}

static char *
edited_checkpoint (EditFunc edit, const char *drop)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *src = model_dir ("dflash-odd");
  g_autofree char *config_path = g_build_filename (src, "config.json", NULL);
  g_autofree char *st_path = g_build_filename (src, "model.safetensors", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *dir = g_dir_make_tmp ("dcp-dflash-ckpt-XXXXXX", &error);
  g_autofree char *out_config = NULL, *out_st = NULL, *text = NULL;

  g_assert_no_error (error);
  json_parser_load_from_file (parser, config_path, &error);
  g_assert_no_error (error);
  if (edit)
    edit (json_node_get_object (json_parser_get_root (parser)));
  text = json_to_string (json_parser_get_root (parser), TRUE);
  out_config = g_build_filename (dir, "config.json", NULL);
  g_file_set_contents (out_config, text, -1, &error);
  g_assert_no_error (error);
  out_st = g_build_filename (dir, "model.safetensors", NULL);
  write_without (st_path, out_st, drop);
  return g_steal_pointer (&dir);
}

static void
edit_hidden (JsonObject *c)
{
  json_object_set_int_member (c, "hidden_size", 64);
}

static void
edit_taps_beyond (JsonObject *c)
{
  g_autoptr(JsonArray) a = json_array_new ();

  json_array_add_int_element (a, 2);
  json_array_add_int_element (a, 8);
  json_object_set_array_member (json_object_get_object_member (c, "dflash_config"), "target_layer_ids",
                                json_array_ref (a));
}

static void
edit_no_mask (JsonObject *c)
{
  json_object_remove_member (json_object_get_object_member (c, "dflash_config"), "mask_token_id");
}

static void
edit_not_dflash (JsonObject *c)
{
  g_autoptr(JsonArray) a = json_array_new ();

  json_array_add_string_element (a, "Qwen3ForCausalLM");
  json_object_set_array_member (c, "architectures", json_array_ref (a));
}

static void
edit_dflash2 (JsonObject *c)
{
  g_autoptr(JsonArray) a = json_array_new ();

  json_array_add_string_element (a, "DFlash2DraftModel");
  json_object_set_array_member (c, "architectures", json_array_ref (a));
}

static void
edit_sliding (JsonObject *c)
{
  g_autoptr(JsonArray) a = json_array_new ();

  json_array_add_string_element (a, "full_attention");
  json_array_add_string_element (a, "sliding_attention");
  json_object_set_array_member (c, "layer_types", json_array_ref (a));
}

static void
edit_scales (JsonObject *c)
{
  JsonObject *d = json_object_get_object_member (c, "dflash_config");

  json_object_set_double_member (d, "input_embedding_scale", 0.5);
  json_object_set_double_member (d, "output_multiplier", 2.0);
  json_object_set_double_member (d, "final_logit_softcapping", 3.0);
}

/* z-lab's optional scalars (embedding scale, logit multiplier, softcap) against the reference's
 * first step with them set. */
static void
test_scales (void)
{
  g_autofree char *dir = edited_checkpoint (edit_scales, NULL);
  g_autofree char *out = g_build_filename (dir, "scaled.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpDrafterModel) model = NULL;
  g_autoptr(DcpDrafterState) state = NULL;
  g_autofree float *taps = NULL, *want = NULL;
  gsize n_taps = 0, n_want = 0;
  Target t = { 0 };

  g_assert_true (convert (dir, out, DCP_RECIPE_BF16, &error));
  g_assert_no_error (error);
  target_open (&t, "odd-sizes");
  model = dcp_drafter_model_open (t.target, out, &error);
  g_assert_no_error (error);
  g_assert_cmpfloat (dcp_drafter_model_get_config (model)->final_logit_softcapping, ==, 3.0);
  taps = read_floats ("taps.f32", &n_taps);
  want = read_floats ("logits-scaled.f32", &n_want);
  g_assert_cmpuint (n_want, ==, 3 * 300);
  state = dcp_drafter_state_new (model);
  add_rows (model, state, taps, 192, 0, 7);
  check_step (model, state, 17, 3, want);
  g_clear_pointer (&state, dcp_drafter_state_free);
  g_clear_pointer (&model, dcp_drafter_model_free);
  target_close (&t);
  remove_dir (dir);
}

/* Each refused checkpoint: the error names the field, and no output file is left. */
static void
test_convert_errors (void)
{
  static const struct {
    EditFunc edit;
    const char *drop, *want;
  } cases[] = {
    { NULL, "fc.weight", "“fc.weight”" },
    { NULL, "layers.1.self_attn.k_norm.weight", "“layers.1.self_attn.k_norm.weight”" },
    { edit_hidden, NULL, "“fc.weight”: field “shape” is [96, 192] but the drafter's config needs [64, 128]" },
    { edit_taps_beyond, NULL, "field “target_layer_ids” names layer 8, beyond the target's 8 layers" },
    { edit_no_mask, NULL, "field “mask_token_id” is missing" },
    { edit_sliding, NULL, "field “layer_types”" },
    { edit_dflash2, NULL, "field “architectures” names a DFlash variant other than DFlashDraftModel" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *dir = edited_checkpoint (cases[i].edit, cases[i].drop);
      g_autofree char *out = g_build_filename (dir, "out.mcapy", NULL);

      g_assert_false (convert (dir, out, DCP_RECIPE_BF16, &error));
      g_assert_nonnull (error);
      g_test_message ("%s", error->message);
      if (strstr (error->message, cases[i].want) == NULL)
        g_error ("case %u: “%s” does not say “%s”", i, error->message, cases[i].want);
      g_assert_false (g_file_test (out, G_FILE_TEST_EXISTS));
      remove_dir (dir);
    }

  /* not a DFlash config: read as a drafter, the error names "architectures" */
  {
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = edited_checkpoint (edit_not_dflash, NULL);
    g_autofree char *path = g_build_filename (dir, "config.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new ();
    DcpDrafterConfig c;

    json_parser_load_from_file (parser, path, &error);
    g_assert_no_error (error);
    g_assert_false (dcp_drafter_config_from_json (&c, json_parser_get_root (parser), &error));
    g_assert_nonnull (strstr (error->message, "“architectures”"));
    remove_dir (dir);
  }
}

/* DFlash's rule when a config names no taps. */
static void
test_default_taps (void)
{
  static const struct { guint target, layers, n; guint want[8]; } cases[] = {
    { 64, 5, 5, { 1, 16, 31, 46, 61 } },
    { 8, 2, 2, { 1, 5 } },
    { 8, 1, 1, { 4 } },
    { 48, 4, 4, { 1, 16, 30, 45 } },   /* 1 + 44 i / 3: 15.67 and 30.33 round to 16 and 30 */
    { 32, 3, 3, { 1, 15, 29 } },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *text = g_strdup_printf (
        "{\"architectures\": [\"DFlashDraftModel\"], \"hidden_size\": 64, \"num_hidden_layers\": %u,"
        " \"num_attention_heads\": 2, \"intermediate_size\": 128, \"vocab_size\": 100,"
        " \"num_target_layers\": %u, \"mask_token_id\": 99}", cases[i].layers, cases[i].target);
      g_autoptr(JsonParser) parser = json_parser_new ();
      DcpDrafterConfig c;

      json_parser_load_from_data (parser, text, -1, &error);
      g_assert_no_error (error);
      g_assert_true (dcp_drafter_config_from_json (&c, json_parser_get_root (parser), &error));
      g_assert_no_error (error);
      g_assert_cmpuint (c.n_taps, ==, cases[i].n);
      g_assert_cmpmem (c.tap_layers, c.n_taps * sizeof (guint), cases[i].want, cases[i].n * sizeof (guint));
      g_assert_cmpuint (c.block_size, ==, 16);
      g_assert_cmpuint (c.head_dim, ==, 32);
    }
}

/* A drafter paired with a target it was not made for: the error names the field. */
static void
test_pairing (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = converted_drafter (&dir);
  g_autoptr(GError) error = NULL;
  DcpDrafterModel *model;
  DcpModelConfig other;
  Target t = { 0 };

  target_open (&t, "real-heads");   /* hidden 128, vocab 512, 4 layers */
  model = dcp_drafter_model_open (t.target, path, &error);
  g_assert_null (model);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "“target.hidden_size” is 96, the model's is 128"));
  g_clear_error (&error);
  target_close (&t);

  target_open (&t, "odd-sizes");
  {
    g_autoptr(DcpModelFile) file = dcp_model_file_open_drafter (path, NULL);
    DcpDrafterConfig shifted = *dcp_model_file_get_drafter (file);

    other = *dcp_backend_get_config (t.target);
    other.vocab_size = 301;
    g_assert_false (dcp_drafter_config_check_target (&shifted, &other, &error));
    g_assert_nonnull (strstr (error->message, "“target.vocab_size”"));
    g_clear_error (&error);
    other = *dcp_backend_get_config (t.target);
    other.n_layers = 5;

    g_assert_false (dcp_drafter_config_check_target (&shifted, &other, &error));
    g_assert_nonnull (strstr (error->message, "“target.num_hidden_layers”"));
    g_clear_error (&error);
    shifted.target_n_layers = 5;
    g_assert_false (dcp_drafter_config_check_target (&shifted, &other, &error));
    g_assert_nonnull (strstr (error->message, "“target.layer_ids” names layer 5"));
  }
  target_close (&t);
  remove_dir (dir);
}

/* The file rewritten with its metadata edited (and, with drop, without that tensor). */
typedef void (*MetaEdit) (JsonObject *metadata);

static char *
rewrite (const char *dir, const char *path, MetaEdit edit, const char *drop)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = dcp_model_file_open_drafter (path, &error);
  g_autofree char *out = g_build_filename (dir, "edited.mcapy", NULL);
  g_autoptr(DcpModelWriter) writer = NULL;
  g_autoptr(JsonNode) metadata = NULL;
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint));
  g_autoptr(GPtrArray) views = g_ptr_array_new ();
  DcpModelFileIter iter;
  const DcpTensorView *t;

  g_assert_no_error (error);
  writer = dcp_model_writer_new (out, &error);
  g_assert_no_error (error);
  dcp_model_file_iter_init (&iter, file);
  while (dcp_model_file_iter_next (&iter, &t))
    if (g_strcmp0 (t->name, drop) != 0)
      {
        gint id = dcp_model_writer_add_tensor (writer, t->name, t->dtype, t->shape, t->ndim, &error);
        g_assert_no_error (error);
        g_array_append_val (ids, id);
        g_ptr_array_add (views, (gpointer) t);
      }
  metadata = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (metadata, dcp_model_file_get_metadata (file));
  metadata = json_node_copy (metadata);
  edit (json_node_get_object (metadata));
  g_assert_true (dcp_model_writer_begin (writer, NULL, 65536, &error));
  for (guint i = 0; i < views->len; i++)
    {
      const DcpTensorView *v = views->pdata[i];
      g_assert_true (dcp_model_writer_write (writer, g_array_index (ids, gint, i), 0, v->data, v->nbytes, &error));
    }
  g_assert_true (dcp_model_writer_finish (writer, metadata, &error));
  g_assert_no_error (error);
  return g_steal_pointer (&out);
}

static JsonObject *
drafter_member (JsonObject *m)
{
  return json_object_get_object_member (m, "drafter");
}

static void
meta_block (JsonObject *m)
{
  json_object_set_int_member (drafter_member (m), "block_size", 8);
}

static void
meta_kind (JsonObject *m)
{
  json_object_set_string_member (drafter_member (m), "kind", "eagle3");
}

static void
meta_arch (JsonObject *m)
{
  json_object_set_string_member (json_object_get_object_member (drafter_member (m), "target"), "architecture", "llama");
}

static void
meta_taps (JsonObject *m)
{
  JsonArray *a = json_object_get_array_member (json_object_get_object_member (drafter_member (m), "target"), "layer_ids");

  json_array_remove_element (a, 1);
  json_array_add_int_element (a, 6);
}

static void
meta_acceptance (JsonObject *m)
{
  json_object_remove_member (drafter_member (m), "acceptance");
}

static void
meta_config_hidden (JsonObject *m)
{
  json_object_set_int_member (json_object_get_object_member (m, "config"), "hidden_size", 64);
}

static void
meta_same (JsonObject *m)
{
  json_object_set_string_member (json_object_get_object_member (drafter_member (m), "target"), "name", "x/y");
}

/* A drafter file whose metadata or tensors disagree with its config: the error names the
 * member or tensor. The same file unedited opens. */
static void
test_file_errors (void)
{
  static const struct { MetaEdit edit; const char *drop, *want; } cases[] = {
    { meta_block, NULL, "metadata field “drafter.block_size” is 8 but the drafter's config says 4" },
    { meta_kind, NULL, "metadata field “drafter.kind” is “eagle3”, not “dflash”" },
    { meta_arch, NULL, "“drafter.target.architecture” is “llama”, not “qwen3_5”" },
    { meta_taps, NULL, "“drafter.target.layer_ids” does not list the config's taps" },
    { meta_acceptance, NULL, "“drafter.acceptance” is missing" },
    { meta_config_hidden, NULL, "“drafter.target.hidden_size” is 96 but the drafter's config says 64" },
    { meta_same, "norm.weight", "tensor “norm.weight”: the drafter file has no such tensor" },
  };
  g_autofree char *dir = NULL;
  g_autofree char *path = converted_drafter (&dir);

  {
    g_autoptr(GError) error = NULL;
    g_autofree char *out = rewrite (dir, path, meta_same, NULL);
    g_autoptr(DcpModelFile) file = dcp_model_file_open_drafter (out, &error);

    g_assert_no_error (error);
    g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (
                       drafter_member (dcp_model_file_get_metadata (file)), "target"), "name"), ==, "x/y");
    g_unlink (out);
  }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *out = rewrite (dir, path, cases[i].edit, cases[i].drop);
      g_autoptr(DcpModelFile) file = dcp_model_file_open_drafter (out, &error);
      g_autofree guint8 *head = NULL;
      gsize len = 0;
      guint64 needed = 0;

      g_assert_null (file);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
      g_test_message ("%s", error->message);
      if (strstr (error->message, cases[i].want) == NULL)
        g_error ("case %u: “%s” does not say “%s”", i, error->message, cases[i].want);
      /* the launcher's head parser agrees on the metadata cases */
      g_clear_error (&error);
      g_file_get_contents (out, (char **) &head, &len, &error);
      g_assert_no_error (error);
      if (cases[i].drop == NULL)
        {
          g_assert_null (dcp_model_info_parse_drafter (head, len, "x", &needed, &error));
          g_assert_nonnull (error);
        }
      g_unlink (out);
    }
  remove_dir (dir);
}

/* decapybara-convert --info on a drafter file: text, JSON and --verify. */
static void
test_tool_info (void)
{
  g_autofree char *tool = g_build_filename (g_path_get_dirname (g_getenv ("DECAPYBARA_ENGINE")), "decapybara-convert", NULL);
  g_autofree char *dir = NULL;
  g_autofree char *path = converted_drafter (&dir);
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL, *json = NULL;
  int status = 0;
  const char *text_argv[] = { tool, "--info", path, "--verify", NULL };
  const char *json_argv[] = { tool, "--info", path, "--json", NULL };

  g_spawn_sync (NULL, (char **) text_argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_nonnull (strstr (out, "layers:        2 (heads 4, KV heads 2, head dim 32, MLP 160), block 4, mask token 298"));
  g_assert_nonnull (strstr (out, "target:        qwen3_5 “test/odd-sizes”: 8 layers, hidden 96, vocab 300, taps after layers [2, 5]"));
  g_spawn_sync (NULL, (char **) json_argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &json, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_nonnull (strstr (json, "\"kind\" : \"dflash\""));
  remove_dir (dir);
}

/* --acceptance: the engine's /stats after serving with the drafter, recorded as
 * drafter.acceptance (and read back by the file reader); bad stats refused, naming what. */
static void
test_acceptance (void)
{
  static const struct {
    const char *stats, *want;
  } bad[] = {
    { "{\"steps\": 3}", "no “scheduler” object" },
    { "{\"scheduler\": {\"verify_steps\": 10, \"drafted_tokens\": 30}}", "“scheduler.accepted_tokens”" },
    { "{\"scheduler\": {\"verify_steps\": 0, \"drafted_tokens\": 0, \"accepted_tokens\": 0}}",
      "measure nothing" },
    { "{\"scheduler\": {\"verify_steps\": 2, \"drafted_tokens\": 3, \"accepted_tokens\": 5}}",
      "measure nothing" },
    { "{\"scheduler\": {\"verify_steps\": 2, \"drafted_tokens\": 12, \"accepted_tokens\": 8}}",
      "more than a block of 3" },
  };
  g_autofree char *input = model_dir ("dflash-odd");
  g_autofree char *dir = g_dir_make_tmp ("dcp-dflash-XXXXXX", NULL);
  g_autofree char *out = g_build_filename (dir, "drafter.mcapy", NULL);
  g_autoptr(JsonNode) stats = json_from_string (
      "{\"scheduler\": {\"verify_steps\": 40, \"drafted_tokens\": 120, \"accepted_tokens\": 70}}", NULL);
  DcpConvertOptions options = { .input_dir = input, .output_path = out, .recipe = DCP_RECIPE_BF16,
                                .n_threads = 2, .acceptance_stats = stats };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = NULL;
  JsonObject *a;

  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  file = dcp_model_file_open_drafter (out, &error);
  g_assert_no_error (error);
  a = json_object_get_object_member (
      json_object_get_object_member (dcp_model_file_get_metadata (file), "drafter"), "acceptance");
  g_assert_cmpfloat (json_object_get_double_member (a, "mean_accepted"), ==, 70.0 / 40);
  g_assert_cmpint (json_object_get_int_member (a, "block"), ==, 4);
  g_assert_cmpstr (json_object_get_string_member (a, "measured_on"), ==,
                   "decapybara /stats: 40 verify steps, 120 drafts, 70 accepted");
  g_clear_pointer (&file, dcp_model_file_free);
  g_unlink (out);

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(JsonNode) b = json_from_string (bad[i].stats, NULL);

      options.acceptance_stats = b;
      g_assert_false (dcp_convert (&options, NULL, &error));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      if (strstr (error->message, bad[i].want) == NULL)
        g_error ("case %u: “%s” does not say “%s”", i, error->message, bad[i].want);
      g_clear_error (&error);
      g_assert_false (g_file_test (out, G_FILE_TEST_EXISTS));
    }
  remove_dir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dflash/file", test_file);
  g_test_add_func ("/dflash/acceptance", test_acceptance);
  g_test_add_func ("/dflash/forward", test_forward);
  g_test_add_func ("/dflash/quantized", test_quantized);
  g_test_add_func ("/dflash/taps", test_taps);
  g_test_add_func ("/dflash/convert-errors", test_convert_errors);
  g_test_add_func ("/dflash/default-taps", test_default_taps);
  g_test_add_func ("/dflash/scales", test_scales);
  g_test_add_func ("/dflash/pairing", test_pairing);
  g_test_add_func ("/dflash/file-errors", test_file_errors);
  g_test_add_func ("/dflash/tool-info", test_tool_info);
  return g_test_run ();
}
