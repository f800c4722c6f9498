/* SPDX-License-Identifier: MIT */
/* DcpCheckpoint: a Hugging Face checkpoint folder as a tensor source under canonical names, on
 * the committed test checkpoint and on sharded, duplicated, unknown and incomplete folders made
 * here (tokenizer files from tests/data/tokenizer/qwen3). */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"

static char *
tokenizer_dir (void)
{
  return g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
}

static void
test_real (void)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
  g_autofree char *tok = tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpCheckpoint) ckpt = dcp_checkpoint_open (dir, tok, &error);
  const DcpTensorView *q;
  DcpTensorSource source;
  guint n;

  g_assert_no_error (error);
  g_assert_cmpuint (dcp_checkpoint_get_config (ckpt)->n_layers, ==, 4);
  n = dcp_checkpoint_get_n_tensors (ckpt);
  g_assert_cmpuint (n, ==, 56);
  for (guint i = 0; i < n; i++)
    {
      const DcpCheckpointTensor *t = dcp_checkpoint_get_tensor (ckpt, i);

      g_assert_false (g_str_has_prefix (t->name, "model."));
      g_assert_true (dcp_checkpoint_lookup (ckpt, t->name) == t->view);
    }
  q = dcp_checkpoint_lookup (ckpt, "layers.3.self_attn.q_proj.weight");
  g_assert_nonnull (q);
  g_assert_cmpuint (q->shape[0], ==, 2 * 2 * 256);
  g_assert_cmpuint (q->shape[1], ==, 128);
  g_assert_null (dcp_checkpoint_lookup (ckpt, "model.layers.3.self_attn.q_proj.weight"));
  source = dcp_checkpoint_get_source (ckpt);
  g_assert_true (dcp_tensor_source_lookup (&source, "lm_head.weight") ==
                 dcp_checkpoint_lookup (ckpt, "lm_head.weight"));
}

/* A one-tensor safetensors file: name, F32 [n] with values 1..n. */
static void
write_shard (const char *dir, const char *file, const char *name, guint n)
{
  g_autofree char *path = g_build_filename (dir, file, NULL);
  g_autofree char *header = g_strdup_printf (
    "{\"%s\":{\"dtype\":\"F32\",\"shape\":[%u],\"data_offsets\":[0,%u]}}", name, n, 4 * n);
  g_autoptr(GByteArray) bytes = g_byte_array_new ();
  guint64 len = GUINT64_TO_LE (strlen (header));
  g_autoptr(GError) error = NULL;

  g_byte_array_append (bytes, (const guint8 *) &len, 8);
  g_byte_array_append (bytes, (const guint8 *) header, strlen (header));
  for (guint i = 0; i < n; i++)
    {
      float v = (float) (i + 1);
      g_byte_array_append (bytes, (const guint8 *) &v, 4);
    }
  g_file_set_contents (path, (const char *) bytes->data, bytes->len, &error);
  g_assert_no_error (error);
}

static char *
make_folder (void)
{
  g_autofree char *src = g_test_build_filename (G_TEST_DIST, "data", "models", "odd-sizes", "config.json", NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *config = NULL;
  char *dir = g_dir_make_tmp ("dcp-ckpt-XXXXXX", &error);
  g_autofree char *dst = g_build_filename (dir, "config.json", NULL);
  gsize len;

  g_assert_no_error (error);
  g_file_get_contents (src, &config, &len, &error);
  g_assert_no_error (error);
  g_file_set_contents (dst, config, len, &error);
  g_assert_no_error (error);
  return dir;
}

static void
remove_folder (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_unlink (path);
    }
  g_rmdir (dir);
}

static void
test_shards (void)
{
  g_autofree char *dir = make_folder ();
  g_autofree char *tok = tokenizer_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpCheckpoint) ckpt = NULL;
  const DcpTensorView *norm;
  DcpTensorSource source;
  DcpBackend *backend;

  write_shard (dir, "model-00001-of-00002.safetensors", "model.layers.0.input_layernorm.weight", 96);
  write_shard (dir, "model-00002-of-00002.safetensors", "model.norm.weight", 96);
  ckpt = dcp_checkpoint_open (dir, tok, &error);
  g_assert_no_error (error);
  norm = dcp_checkpoint_lookup (ckpt, "layers.0.input_layernorm.weight");
  g_assert_nonnull (norm);
  g_assert_cmpfloat (dcp_tensor_view_get_f32 (norm, 95), ==, 96.0f);
  g_assert_nonnull (dcp_checkpoint_lookup (ckpt, "norm.weight"));
  g_assert_null (dcp_checkpoint_lookup (ckpt, "model.norm.weight"));

  /* an incomplete model: the backend names the first missing tensor */
  source = dcp_checkpoint_get_source (ckpt);
  backend = dcp_backend_cpu_new (dcp_checkpoint_get_config (ckpt), &source, 1, &error);
  g_assert_null (backend);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (error->message, "embed_tokens.weight"));
  g_clear_error (&error);
  g_clear_pointer (&ckpt, dcp_checkpoint_free);

  /* the same tensor in two shards */
  write_shard (dir, "model-00003-of-00003.safetensors", "model.norm.weight", 96);
  g_assert_null (dcp_checkpoint_open (dir, tok, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (error->message, "model.norm.weight"));
  g_clear_error (&error);

  /* a tensor that belongs to no part of the model is refused, by name */
  write_shard (dir, "model-00003-of-00003.safetensors", "optimizer.state", 4);
  g_assert_null (dcp_checkpoint_open (dir, tok, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "optimizer.state"));
  remove_folder (dir);
}

static void
test_missing (void)
{
  g_autofree char *dir = make_folder ();
  g_autofree char *tok = tokenizer_dir ();
  g_autoptr(GError) error = NULL;

  g_assert_null (dcp_checkpoint_open (dir, tok, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
  g_clear_error (&error);
  remove_folder (dir);
  g_assert_null (dcp_checkpoint_open (dir, tok, &error));
  g_assert_nonnull (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/checkpoint/real", test_real);
  g_test_add_func ("/checkpoint/shards", test_shards);
  g_test_add_func ("/checkpoint/missing", test_missing);
  return g_test_run ();
}
