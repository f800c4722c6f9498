/* SPDX-License-Identifier: MIT */
/* decapybara-convert on the committed checkpoints: each with every recipe, read back tensor by
 * tensor (BF16 bit-exact against the safetensors, MX formats byte-equal to dcp_quantize of the
 * same input), metadata against the input files, and the tool's --info. Also a sharded copy of a
 * checkpoint, and inputs that must be refused without leaving a file behind. */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-checkpoint.h"
#include "dcp-checksum.h"
#include "dcp-converter.h"
#include "dcp-error.h"
#include "dcp-float16.h"
#include "dcp-model-file.h"
#include "dcp-quant.h"

static char *
tokenizer_dir (void)
{
  return g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
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

/* Every tensor of the file against the checkpoint. */
static void
check_tensors (DcpCheckpoint *ckpt, DcpModelFile *file, DcpRecipe recipe)
{
  guint n_mx = 0;

  g_assert_cmpuint (dcp_model_file_get_n_tensors (file), ==, dcp_checkpoint_get_n_tensors (ckpt));
  for (guint i = 0; i < dcp_checkpoint_get_n_tensors (ckpt); i++)
    {
      const DcpCheckpointTensor *src = dcp_checkpoint_get_tensor (ckpt, i);
      const DcpTensorView *t = dcp_model_file_lookup (file, src->name);
      DcpDType want = dcp_recipe_tensor_dtype (recipe, src->name, src->view->ndim, src->view->dtype);

      g_assert_nonnull (t);
      g_assert_cmpint (t->dtype, ==, want);
      g_assert_cmpuint (t->ndim, ==, src->view->ndim);
      g_assert_cmpmem (t->shape, 8 * t->ndim, src->view->shape, 8 * t->ndim);
      g_assert_cmpuint (dcp_model_file_get_checksum (file, t), ==, dcp_checksum64 (t->data, t->nbytes));
      if (t->dtype == src->view->dtype)
        g_assert_cmpmem (t->data, t->nbytes, src->view->data, src->view->nbytes);
      else
        {
          g_autofree float *f32 = g_new (float, src->view->n_elements);
          g_autofree guint8 *q = g_malloc (t->nbytes);

          g_assert_true (dcp_dtype_is_block (t->dtype));
          g_assert_cmpuint (t->nbytes, ==, dcp_quant_tensor_bytes (t->dtype, t->shape[0], t->shape[1]));
          for (guint64 k = 0; k < src->view->n_elements; k++)
            f32[k] = dcp_tensor_view_get_f32 (src->view, k);
          dcp_quantize (t->dtype, f32, t->shape[0], t->shape[1], q);
          g_assert_cmpmem (t->data, t->nbytes, q, t->nbytes);
          n_mx++;
        }
    }
  /* Every recipe but bf16 quantizes the matrices, a/b projections excepted. */
  if (recipe == DCP_RECIPE_BF16)
    g_assert_cmpuint (n_mx, ==, 0);
  else
    g_assert_cmpuint (n_mx, >, 10);
}

static void
check_metadata (DcpCheckpoint *ckpt, DcpModelFile *file, DcpRecipe recipe, const char *model)
{
  JsonObject *m = dcp_model_file_get_metadata (file);
  JsonObject *source = json_object_get_object_member (m, "source");
  JsonObject *sizes = json_object_get_object_member (m, "sizes");
  JsonArray *files = json_object_get_array_member (source, "files");
  JsonObject *tc = json_object_get_object_member (m, "tokenizer_config");
  g_autofree char *shard_sha = dcp_checkpoint_hash_shard (ckpt, 0, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonNode) stored = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(GError) error = NULL;
  const char *text;
  gsize len;
  guint64 total = 0;
  DcpModelFileIter iter;
  const DcpTensorView *t;

  g_assert_true (json_node_equal (json_object_get_member (m, "config"), dcp_checkpoint_get_config_json (ckpt)));
  g_assert_true (json_node_equal (json_object_get_member (m, "generation"), dcp_checkpoint_get_generation (ckpt)));
  g_assert_cmpstr (json_object_get_string_member (m, "chat_template"), ==, dcp_checkpoint_get_chat_template (ckpt));
  g_assert_nonnull (strstr (json_object_get_string_member (m, "chat_template"), "<|im_start|>"));
  g_assert_false (json_object_has_member (tc, "chat_template"));
  g_assert_cmpstr (json_object_get_string_member (tc, "eos_token"), ==, "<|im_end|>");
  g_assert_true (json_node_is_null (json_object_get_member (m, "accuracy")));
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (m, "recipe"), "name"), ==, dcp_recipe_name (recipe));
  g_assert_cmpstr (json_object_get_string_member (source, "model_id"), ==, model);
  g_assert_cmpuint (json_array_get_length (files), ==, dcp_checkpoint_get_n_shards (ckpt));
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (files, 0), "sha256"), ==, shard_sha);
  g_assert_false (json_object_get_boolean_member (json_object_get_object_member (m, "parts"), "mtp"));

  dcp_model_file_iter_init (&iter, file);
  while (dcp_model_file_iter_next (&iter, &t))
    total += t->nbytes;
  g_assert_cmpint (json_object_get_int_member (sizes, "tensors"), ==, total);
  g_assert_cmpint (json_object_get_int_member (sizes, "text") + json_object_get_int_member (sizes, "embedding") +
                   json_object_get_int_member (sizes, "lm_head"), ==, total);
  g_assert_cmpint (json_object_get_int_member (sizes, "file"), ==, dcp_model_file_get_header (file)->file_size);

  /* The tokenizer section is tokenizer.json, uncompressed. */
  text = g_bytes_get_data (dcp_checkpoint_get_tokenizer (ckpt), &len);
  json_parser_load_from_data (parser, text, len, &error);
  g_assert_no_error (error);
  json_node_set_object (stored, dcp_model_file_get_tokenizer (file));
  g_assert_true (json_node_equal (json_parser_get_root (parser), stored));
}

/* A small tokenizer folder: the real tokenizer_config.json (chat template, special tokens) and a
 * tiny tokenizer.json, so that most conversions skip the 11 MB one. */
static char *
small_tokenizer_dir (void)
{
  static const char json[] = "{\"version\": \"1.0\", \"added_tokens\": [], \"model\": {\"type\": \"BPE\", "
                             "\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}";
  g_autoptr(GError) error = NULL;
  g_autofree char *tok = tokenizer_dir ();
  g_autofree char *tc_from = g_build_filename (tok, "tokenizer_config.json", NULL);
  char *dir = g_dir_make_tmp ("dcp-small-tok-XXXXXX", &error);
  g_autofree char *json_path = g_build_filename (dir, "tokenizer.json", NULL);
  g_autofree char *tc_path = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *tc = NULL;

  g_assert_no_error (error);
  g_file_set_contents (json_path, json, -1, &error);
  g_assert_no_error (error);
  g_file_get_contents (tc_from, &tc, NULL, &error);
  g_assert_no_error (error);
  g_file_set_contents (tc_path, tc, -1, &error);
  g_assert_no_error (error);
  return dir;
}

static void
test_convert_all (gconstpointer data)
{
  const char *model = data;
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", model, NULL);
  g_autofree char *tok = tokenizer_dir ();
  g_autofree char *small = small_tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-convert-XXXXXX", &error);
  g_autoptr(DcpCheckpoint) ckpt_real = dcp_checkpoint_open (input, tok, &error);
  g_autoptr(DcpCheckpoint) ckpt_small = dcp_checkpoint_open (input, small, &error);

  g_assert_no_error (error);
  for (DcpRecipe r = 0; r < DCP_RECIPE_N; r++)
    {
      /* The real tokenizer (gzipped) once, with the bf16 recipe. */
      DcpCheckpoint *ckpt = r == DCP_RECIPE_BF16 ? ckpt_real : ckpt_small;
      g_autofree char *name = g_strdup_printf ("%s-%s.mcapy", model, dcp_recipe_name (r));
      g_autofree char *out = g_build_filename (dir, name, NULL);
      DcpConvertOptions options = { input, r == DCP_RECIPE_BF16 ? tok : small, out, r, NULL, NULL, FALSE, 2 };
      DcpConvertStats stats = { 0 };
      g_autoptr(DcpModelFile) file = NULL;

      g_assert_true (dcp_convert (&options, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_tensors, ==, dcp_checkpoint_get_n_tensors (ckpt));
      file = dcp_model_file_open (out, &error);
      g_assert_no_error (error);
      g_assert_true (dcp_model_file_verify (file, &error));
      check_tensors (ckpt, file, r);
      check_metadata (ckpt, file, r, model);
      g_test_message ("%s %s: %" G_GUINT64_FORMAT " bytes", model, dcp_recipe_name (r), stats.bytes_out);
    }
  remove_dir (dir);
  remove_dir (small);
}

static char *
run_tool (const char *arg1, const char *arg2, const char *arg3, int *status)
{
  g_autofree char *tool = g_build_filename (g_path_get_dirname (g_getenv ("DECAPYBARA_ENGINE")), "decapybara-convert", NULL);
  const char *argv[] = { tool, arg1, arg2, arg3, NULL };
  g_autoptr(GError) error = NULL;
  char *out = NULL;

  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, status, &error);
  g_assert_no_error (error);
  return out;
}

/* decapybara-convert itself: a conversion, then --info and --info --json. */
static void
test_tool (void)
{
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "odd-sizes", NULL);
  g_autofree char *tok = small_tokenizer_dir ();
  g_autofree char *tok_arg = g_strconcat ("--tokenizer=", tok, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-convert-tool-XXXXXX", &error);
  g_autofree char *out = g_build_filename (dir, "odd.mcapy", NULL);
  g_autofree char *text = NULL, *json = NULL, *converted = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *tool = g_build_filename (g_path_get_dirname (g_getenv ("DECAPYBARA_ENGINE")), "decapybara-convert", NULL);
  const char *argv[] = { tool, "-q", "--recipe=small", tok_arg, input, out, NULL };
  JsonObject *root;
  int status = -1;

  if (g_getenv ("DECAPYBARA_ENGINE") == NULL)
    {
      g_test_skip ("DECAPYBARA_ENGINE is not set");
      return;
    }
  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &converted, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));

  text = run_tool ("--info", out, NULL, &status);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_nonnull (strstr (text, "recipe:        small"));
  g_assert_nonnull (strstr (text, "8 layers (2 full attention), hidden 96"));
  g_assert_nonnull (strstr (text, "MXFP4_E2M1"));

  json = run_tool ("--info", out, "--json", &status);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  json_parser_load_from_data (parser, json, -1, &error);
  g_assert_no_error (error);
  root = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (root, "format_version"), ==, "1.0");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (root, "tensors")), ==, 109);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (json_object_get_object_member (root, "metadata"), "recipe"), "name"), ==, "small");

  /* A damaged file: exit status 1 and nothing on stdout. */
  g_free (text);
  text = run_tool ("--info", input, NULL, &status);
  g_assert_false (g_spawn_check_wait_status (status, NULL));
  g_assert_cmpstr (text, ==, "");
  remove_dir (dir);
  remove_dir (tok);
}

/* Writes a safetensors file: tensors given as (name, dtype, shape, bytes). */
typedef struct {
  const char *name;
  DcpDType dtype;
  const guint64 *shape;
  guint ndim;
  GBytes *bytes;
} StTensor;

static void
write_safetensors (const char *path, GArray *tensors)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GByteArray) file = g_byte_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *header = NULL;
  guint64 at = 0, len;

  json_builder_begin_object (b);
  for (guint i = 0; i < tensors->len; i++)
    {
      StTensor *t = &g_array_index (tensors, StTensor, i);
      json_builder_set_member_name (b, t->name);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, dcp_dtype_name (t->dtype));
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < t->ndim; d++)
        json_builder_add_int_value (b, t->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "data_offsets");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, at);
      at += g_bytes_get_size (t->bytes);
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
  for (guint i = 0; i < tensors->len; i++)
    {
      GBytes *bytes = g_array_index (tensors, StTensor, i).bytes;
      g_byte_array_append (file, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
    }
  g_file_set_contents (path, (const char *) file->data, file->len, &error);
  g_assert_no_error (error);
}

static void
copy_file (const char *from_dir, const char *to_dir, const char *name)
{
  g_autofree char *from = g_build_filename (from_dir, name, NULL);
  g_autofree char *to = g_build_filename (to_dir, name, NULL);
  g_autofree char *text = NULL;
  gsize len;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (from, &text, &len, &error);
  g_assert_no_error (error);
  g_file_set_contents (to, text, len, &error);
  g_assert_no_error (error);
}

/* real-heads as a sharded checkpoint with an index, the second shard in F32 (matrices) and F16
 * (everything else), Qwen3_5ForConditionalGeneration names (model.language_model.*), and the
 * tokenizer files in the folder itself. */
static void
test_sharded (void)
{
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
  g_autofree char *tok = small_tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-sharded-XXXXXX", &error);
  g_autofree char *out = g_build_filename (dir, "out.mcapy", NULL);
  g_autofree char *index_path = g_build_filename (dir, "model.safetensors.index.json", NULL);
  g_autoptr(DcpCheckpoint) orig = dcp_checkpoint_open (input, tok, &error);
  g_autoptr(DcpCheckpoint) sharded = NULL;
  g_autoptr(DcpModelFile) file = NULL;
  g_autoptr(GArray) shard0 = g_array_new (FALSE, FALSE, sizeof (StTensor));
  g_autoptr(GArray) shard1 = g_array_new (FALSE, FALSE, sizeof (StTensor));
  GArray *shard[2] = { shard0, shard1 };
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(GString) index = g_string_new ("{\"metadata\": {}, \"weight_map\": {");
  DcpConvertOptions options = { dir, NULL, out, DCP_RECIPE_BF16, "Qwen/Test", "abc123", FALSE, 1 };
  guint n = dcp_checkpoint_get_n_tensors (orig);

  g_assert_no_error (error);
  for (guint i = 0; i < n; i++)
    {
      const DcpCheckpointTensor *t = dcp_checkpoint_get_tensor (orig, i);
      StTensor st = { NULL, t->view->dtype, t->view->shape, t->view->ndim, NULL };
      guint s = i % 2;
      char *name = g_strconcat (g_str_has_prefix (t->name, "lm_head") ? "" : "model.language_model.", t->name, NULL);

      if (s == 0)
        st.bytes = g_bytes_new_static (t->view->data, t->view->nbytes);
      else if (t->view->ndim == 2)
        {
          float *f = g_new (float, t->view->n_elements);
          for (guint64 k = 0; k < t->view->n_elements; k++)
            f[k] = dcp_tensor_view_get_f32 (t->view, k);
          st.dtype = DCP_DTYPE_F32;
          st.bytes = g_bytes_new_take (f, 4 * t->view->n_elements);
        }
      else
        {
          guint16 *h = g_new (guint16, t->view->n_elements);
          for (guint64 k = 0; k < t->view->n_elements; k++)
            h[k] = GUINT16_TO_LE (dcp_f32_to_f16 (dcp_tensor_view_get_f32 (t->view, k)));
          st.dtype = DCP_DTYPE_F16;
          st.bytes = g_bytes_new_take (h, 2 * t->view->n_elements);
        }
      st.name = name;
      g_ptr_array_add (names, name);
      g_ptr_array_add (keep, st.bytes);
      g_array_append_val (shard[s], st);
      g_string_append_printf (index, "%s\"%s\": \"model-0000%u-of-00002.safetensors\"", i ? ", " : "", name, s + 1);
    }
  g_string_append (index, "}}");
  for (guint s = 0; s < 2; s++)
    {
      g_autofree char *name = g_strdup_printf ("model-0000%u-of-00002.safetensors", s + 1);
      g_autofree char *path = g_build_filename (dir, name, NULL);
      write_safetensors (path, shard[s]);
    }
  g_file_set_contents (index_path, index->str, index->len, &error);
  g_assert_no_error (error);
  copy_file (input, dir, "config.json");
  copy_file (tok, dir, "tokenizer.json");
  copy_file (tok, dir, "tokenizer_config.json");

  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  file = dcp_model_file_open (out, &error);
  g_assert_no_error (error);
  sharded = dcp_checkpoint_open (dir, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_checkpoint_get_n_shards (sharded), ==, 2);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (json_object_get_object_member (
                    dcp_model_file_get_metadata (file), "source"), "files")), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (
                   dcp_model_file_get_metadata (file), "source"), "revision"), ==, "abc123");
  g_assert_true (json_node_is_null (json_object_get_member (dcp_model_file_get_metadata (file), "generation")));
  for (guint i = 0; i < n; i++)
    {
      const DcpCheckpointTensor *t = dcp_checkpoint_get_tensor (orig, i);
      const DcpTensorView *v = dcp_model_file_lookup (file, t->name);

      g_assert_nonnull (v);
      if (i % 2 == 0 || v->ndim == 2)
        {
          /* BF16 in, or BF16 values carried exactly by F32: the original bits. */
          g_assert_cmpint (v->dtype, ==, DCP_DTYPE_BF16);
          g_assert_cmpmem (v->data, v->nbytes, t->view->data, t->view->nbytes);
        }
      else
        {
          /* F16 norms and vectors are kept, widened to F32. */
          g_assert_cmpint (v->dtype, ==, DCP_DTYPE_F32);
          for (guint64 k = 0; k < v->n_elements; k++)
            g_assert_cmpfloat (dcp_tensor_view_get_f32 (v, k), ==,
                               dcp_f16_to_f32 (dcp_f32_to_f16 (dcp_tensor_view_get_f32 (t->view, k))));
        }
    }
  remove_dir (dir);
  remove_dir (tok);
}

static GBytes *
random_bf16 (GRand *rand, guint64 n)
{
  guint16 *h = g_new (guint16, n);

  for (guint64 k = 0; k < n; k++)
    h[k] = GUINT16_TO_LE (dcp_f32_to_bf16 ((float) g_rand_double_range (rand, -0.1, 0.1)));
  return g_bytes_new_take (h, 2 * n);
}

/* MTP and vision tensors are kept: real-heads plus a second file of them, found as *.safetensors
 * (no index), converted with the medium recipe. */
static void
test_mtp_vision (void)
{
  static const guint64 fc[] = { 128, 256 }, up[] = { 384, 128 }, norm[] = { 128 };
  static const guint64 qkv[] = { 96, 40 }, bias[] = { 96 }, patch[] = { 8, 3, 2, 4, 4 }, pos[] = { 16, 8 };
  StTensor extra[] = {
    { "mtp.fc.weight", DCP_DTYPE_BF16, fc, 2, NULL },
    { "mtp.layers.0.mlp.up_proj.weight", DCP_DTYPE_BF16, up, 2, NULL },
    { "mtp.norm.weight", DCP_DTYPE_BF16, norm, 1, NULL },
    { "model.visual.blocks.0.attn.qkv.weight", DCP_DTYPE_BF16, qkv, 2, NULL },
    { "model.visual.blocks.0.attn.qkv.bias", DCP_DTYPE_BF16, bias, 1, NULL },
    { "model.visual.patch_embed.proj.weight", DCP_DTYPE_BF16, patch, 5, NULL },
    { "model.visual.pos_embed.weight", DCP_DTYPE_BF16, pos, 2, NULL },
  };
  static const struct { const char *name; DcpDType dtype; } want[] = {
    { "mtp.fc.weight", DCP_DTYPE_MXFP6_E2M3 },
    { "mtp.layers.0.mlp.up_proj.weight", DCP_DTYPE_MXFP6_E2M3 },
    { "mtp.norm.weight", DCP_DTYPE_BF16 },
    { "visual.blocks.0.attn.qkv.weight", DCP_DTYPE_MXFP8_E4M3 },
    { "visual.blocks.0.attn.qkv.bias", DCP_DTYPE_BF16 },
    { "visual.patch_embed.proj.weight", DCP_DTYPE_BF16 },
    { "visual.pos_embed.weight", DCP_DTYPE_BF16 },
  };
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
  g_autofree char *tok = small_tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-mtp-vision-XXXXXX", &error);
  g_autofree char *extra_path = g_build_filename (dir, "extra.safetensors", NULL);
  g_autofree char *out = g_build_filename (dir, "out.mcapy", NULL);
  g_autoptr(GArray) tensors = g_array_new (FALSE, FALSE, sizeof (StTensor));
  g_autoptr(DcpModelFile) file = NULL;
  g_autoptr(DcpCheckpoint) ckpt = NULL;
  DcpConvertOptions options = { dir, tok, out, DCP_RECIPE_MEDIUM, NULL, NULL, FALSE, 2 };
  GRand *rand = g_rand_new_with_seed (99);
  JsonObject *m, *sizes;

  for (guint i = 0; i < G_N_ELEMENTS (extra); i++)
    {
      guint64 n = 1;
      for (guint d = 0; d < extra[i].ndim; d++)
        n *= extra[i].shape[d];
      extra[i].bytes = random_bf16 (rand, n);
      g_array_append_val (tensors, extra[i]);
    }
  write_safetensors (extra_path, tensors);
  copy_file (input, dir, "config.json");
  copy_file (input, dir, "model.safetensors");

  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  file = dcp_model_file_open (out, &error);
  g_assert_no_error (error);
  ckpt = dcp_checkpoint_open (dir, tok, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_checkpoint_get_n_shards (ckpt), ==, 2);
  check_tensors (ckpt, file, DCP_RECIPE_MEDIUM);
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      const DcpTensorView *t = dcp_model_file_lookup (file, want[i].name);
      g_assert_nonnull (t);
      g_assert_cmpint (t->dtype, ==, want[i].dtype);
    }
  g_assert_cmpuint (dcp_model_file_lookup (file, "visual.patch_embed.proj.weight")->ndim, ==, 5);
  m = dcp_model_file_get_metadata (file);
  g_assert_true (json_object_get_boolean_member (json_object_get_object_member (m, "parts"), "mtp"));
  g_assert_true (json_object_get_boolean_member (json_object_get_object_member (m, "parts"), "vision"));
  sizes = json_object_get_object_member (m, "sizes");
  g_assert_cmpint (json_object_get_int_member (sizes, "mtp"), >, 0);
  g_assert_cmpint (json_object_get_int_member (sizes, "vision"), >, 0);

  /* --vision bf16: the tower's matrices in BF16 whatever the recipe says, and the recipe's
   * vision group says so. */
  g_clear_pointer (&file, dcp_model_file_free);
  options.vision = DCP_CONVERT_VISION_BF16;
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  file = dcp_model_file_open (out, &error);
  g_assert_no_error (error);
  g_assert_cmpint (dcp_model_file_lookup (file, "visual.blocks.0.attn.qkv.weight")->dtype, ==,
                   DCP_DTYPE_BF16);
  g_assert_cmpint (dcp_model_file_lookup (file, "mtp.fc.weight")->dtype, ==, DCP_DTYPE_MXFP6_E2M3);
  m = dcp_model_file_get_metadata (file);
  g_assert_cmpstr (
      json_object_get_string_member (
          json_object_get_object_member (json_object_get_object_member (m, "recipe"), "groups"),
          "vision"),
      ==, dcp_dtype_name (DCP_DTYPE_BF16));
  for (guint i = 0; i < G_N_ELEMENTS (extra); i++)
    g_bytes_unref (extra[i].bytes);
  g_rand_free (rand);
  remove_dir (dir);
  remove_dir (tok);
}

/* --vision off: a checkpoint with a tower (vision-small) becomes a file without one: no visual.*
 * tensor, no vision_config or image processor in the metadata, so the model reads as text-only;
 * the text tensors are as without the option. */
static void
test_vision_off (void)
{
  g_autofree char *input =
      g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small", NULL);
  g_autofree char *tok = small_tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-vision-off-XXXXXX", &error);
  g_autofree char *with_path = g_build_filename (dir, "with.mcapy", NULL);
  g_autofree char *without_path = g_build_filename (dir, "without.mcapy", NULL);
  g_autoptr(DcpCheckpoint) ckpt = dcp_checkpoint_open (input, tok, &error);
  g_autoptr(DcpModelFile) with = NULL, without = NULL;
  DcpConvertOptions options = { input, tok, with_path, DCP_RECIPE_MEDIUM, NULL, NULL, FALSE, 2 };
  DcpConvertStats stats = { 0 };
  DcpModelFileIter iter;
  const DcpTensorView *t;
  JsonObject *m;
  guint n_vision = 0;

  g_assert_no_error (error);
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  options.output_path = without_path;
  options.vision = DCP_CONVERT_VISION_OFF;
  g_assert_true (dcp_convert (&options, &stats, &error));
  g_assert_no_error (error);
  with = dcp_model_file_open (with_path, &error);
  g_assert_no_error (error);
  without = dcp_model_file_open (without_path, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_model_file_verify (without, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_model_file_get_config (with)->has_vision);
  g_assert_false (dcp_model_file_get_config (without)->has_vision);

  /* Every tensor of the file with the tower but visual.* is in the other, the same bytes. */
  dcp_model_file_iter_init (&iter, with);
  while (dcp_model_file_iter_next (&iter, &t))
    {
      const DcpTensorView *same = dcp_model_file_lookup (without, t->name);

      if (dcp_tensor_component (t->name) == DCP_COMPONENT_VISION)
        {
          g_assert_null (same);
          n_vision++;
          continue;
        }
      g_assert_nonnull (same);
      g_assert_cmpint (same->dtype, ==, t->dtype);
      g_assert_cmpmem (same->data, same->nbytes, t->data, t->nbytes);
    }
  g_assert_cmpuint (n_vision, >, 0);
  g_assert_cmpuint (dcp_model_file_get_n_tensors (without), ==,
                    dcp_model_file_get_n_tensors (with) - n_vision);
  g_assert_cmpuint (stats.n_tensors, ==, dcp_model_file_get_n_tensors (without));
  g_assert_cmpuint (dcp_checkpoint_get_n_tensors (ckpt), ==, dcp_model_file_get_n_tensors (with));

  m = dcp_model_file_get_metadata (without);
  g_assert_false (
      json_object_get_boolean_member (json_object_get_object_member (m, "parts"), "vision"));
  g_assert_cmpint (
      json_object_get_int_member (json_object_get_object_member (m, "sizes"), "vision"), ==, 0);
  g_assert_false (
      json_object_has_member (json_object_get_object_member (m, "config"), "vision_config"));
  g_assert_true (json_node_is_null (json_object_get_member (m, "preprocessor")));
  m = dcp_model_file_get_metadata (with);
  g_assert_true (
      json_object_get_boolean_member (json_object_get_object_member (m, "parts"), "vision"));
  g_assert_false (json_node_is_null (json_object_get_member (m, "preprocessor")));

  g_clear_pointer (&with, dcp_model_file_free);
  g_clear_pointer (&without, dcp_model_file_free);
  remove_dir (dir);
  remove_dir (tok);
}

static void
expect_refused (const char *dir, const char *tok, const char *what)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *out_dir = g_dir_make_tmp ("dcp-refused-XXXXXX", &error);
  g_autofree char *out = g_build_filename (out_dir, "x.mcapy", NULL);
  DcpConvertOptions options = { dir, tok, out, DCP_RECIPE_TINY, NULL, NULL, FALSE, 1 };
  g_autoptr(GDir) d = NULL;

  g_assert_false (dcp_convert (&options, NULL, &error));
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  if (strstr (error->message, what) == NULL)
    g_error ("the error “%s” does not name “%s”", error->message, what);
  /* Nothing left behind. */
  d = g_dir_open (out_dir, 0, NULL);
  g_assert_null (g_dir_read_name (d));
  g_rmdir (out_dir);
}

static void
test_refused (void)
{
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
  g_autofree char *tok = small_tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-bad-ckpt-XXXXXX", &error);
  g_autofree char *config = g_build_filename (dir, "config.json", NULL);
  g_autofree char *text = NULL, *changed = NULL, *st_path = NULL;
  g_autofree char *st = g_build_filename (dir, "model.safetensors", NULL);

  expect_refused (input, NULL, "tokenizer.json");              /* the checkpoint has none */
  expect_refused ("/nonexistent", tok, "not a folder");
  /* A config whose MLP size does not match the weights. */
  copy_file (input, dir, "config.json");
  copy_file (input, dir, "model.safetensors");
  g_file_get_contents (config, &text, NULL, &error);
  changed = g_strjoinv ("\"intermediate_size\": 320", g_strsplit (text, "\"intermediate_size\": 384", 2));
  g_file_set_contents (config, changed, -1, &error);
  g_assert_no_error (error);
  expect_refused (dir, tok, "shape");
  /* A damaged shard. */
  g_file_set_contents (config, text, -1, &error);
  st_path = g_strdup (st);
  g_assert_no_error (error);
  g_file_set_contents (st_path, "\x10\0\0\0\0\0\0\0{\"a\": 1}        ", 24, &error);
  expect_refused (dir, tok, "model.safetensors");
  remove_dir (dir);
  remove_dir (tok);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/convert/real-heads", "real-heads", test_convert_all);
  g_test_add_data_func ("/convert/odd-sizes", "odd-sizes", test_convert_all);
  g_test_add_func ("/convert/sharded", test_sharded);
  g_test_add_func ("/convert/mtp-vision", test_mtp_vision);
  g_test_add_func ("/convert/vision-off", test_vision_off);
  g_test_add_func ("/convert/refused", test_refused);
  g_test_add_func ("/convert/tool", test_tool);
  return g_test_run ();
}
