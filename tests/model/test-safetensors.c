/* SPDX-License-Identifier: MIT */
/* The safetensors reader on the committed test checkpoints, and on damaged files. */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-safetensors.h"

static char *
model_path (const char *model, const char *file)
{
  return g_test_build_filename (G_TEST_DIST, "data", "models", model, file, NULL);
}

static void
test_real_checkpoint (void)
{
  g_autofree char *path = model_path ("real-heads", "model.safetensors");
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpSafetensors) st = dcp_safetensors_open (path, &error);
  const DcpTensorView *qkv, *norm;
  float sum = 0;

  g_assert_no_error (error);
  g_assert_cmpuint (dcp_safetensors_get_n_tensors (st), ==, 56);
  qkv = dcp_safetensors_lookup (st, "model.layers.0.linear_attn.in_proj_qkv.weight");
  g_assert_nonnull (qkv);
  g_assert_cmpint (qkv->dtype, ==, DCP_DTYPE_BF16);
  g_assert_cmpuint (qkv->ndim, ==, 2);
  g_assert_cmpuint (qkv->shape[0], ==, 1280);
  g_assert_cmpuint (qkv->shape[1], ==, 128);
  g_assert_cmpuint (qkv->nbytes, ==, 1280 * 128 * 2);
  /* Randomised weights: not all zero, all finite. */
  norm = dcp_safetensors_lookup (st, "model.norm.weight");
  for (guint64 i = 0; i < norm->n_elements; i++)
    sum += ABS (dcp_tensor_view_get_f32 (norm, i));
  g_assert_cmpfloat (sum, >, 0.1f);
  g_assert_null (dcp_safetensors_lookup (st, "no.such.tensor"));
  g_assert_cmpstr (g_hash_table_lookup (dcp_safetensors_get_metadata (st), "format"), ==, "pt");
}

/* Writes a safetensors file with the given header text and data length. */
static char *
write_file (const char *header, gsize data_len, gint64 claimed_len)
{
  g_autofree char *path = NULL;
  g_autoptr(GByteArray) bytes = g_byte_array_new ();
  guint64 len = GUINT64_TO_LE (claimed_len >= 0 ? (guint64) claimed_len : strlen (header));
  g_autoptr(GError) error = NULL;
  int fd = g_file_open_tmp ("dcp-st-XXXXXX.safetensors", &path, &error);

  g_assert_no_error (error);
  close (fd);
  g_byte_array_append (bytes, (const guint8 *) &len, 8);
  g_byte_array_append (bytes, (const guint8 *) header, strlen (header));
  for (gsize i = 0; i < data_len; i++)
    g_byte_array_append (bytes, (const guint8 *) "\x3f", 1);
  g_file_set_contents (path, (const char *) bytes->data, bytes->len, &error);
  g_assert_no_error (error);
  return g_steal_pointer (&path);
}

static void
expect_corrupt (const char *header, gsize data_len, gint64 claimed_len, const char *fragment)
{
  g_autofree char *path = write_file (header, data_len, claimed_len);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpSafetensors) st = dcp_safetensors_open (path, &error);

  g_assert_null (st);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  if (strstr (error->message, fragment) == NULL)
    g_error ("“%s” does not mention “%s”", error->message, fragment);
  g_assert_nonnull (strstr (error->message, path));
  g_unlink (path);
}

static void
test_damaged (void)
{
  const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  g_autofree char *path = write_file (ok, 8, -1);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpSafetensors) st = dcp_safetensors_open (path, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (dcp_safetensors_get_n_tensors (st), ==, 1);
  g_unlink (path);

  expect_corrupt (ok, 8, 1 << 30, "header length");
  expect_corrupt (ok, 4, -1, "outside");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, -1, "not valid JSON");
  expect_corrupt ("[1,2]", 0, -1, "not a JSON object");
  expect_corrupt ("", 0, -1, "not a JSON object");
  expect_corrupt ("   ", 0, -1, "not a JSON object");
  expect_corrupt ("{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, "“dtype”");
  expect_corrupt ("{\"a\":{\"dtype\":{},\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, "“dtype”");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, -1, "“shape”");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, -1, "need 12");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, -1, "overflows");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, -1, "outside");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, -1, "overlaps");
  expect_corrupt ("{\"__metadata__\":{\"format\":3}}", 0, -1, "__metadata__");
  expect_corrupt ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\xff}", 8, -1, "UTF-8");
}

static void
test_short_and_missing (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp ("dcp-st-XXXXXX", &path, &error);

  close (fd);
  g_assert_null (dcp_safetensors_open (path, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_clear_error (&error);
  g_unlink (path);
  g_assert_null (dcp_safetensors_open ("/nonexistent/model.safetensors", &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_IO);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/safetensors/real-checkpoint", test_real_checkpoint);
  g_test_add_func ("/safetensors/damaged", test_damaged);
  g_test_add_func ("/safetensors/short-and-missing", test_short_and_missing);
  return g_test_run ();
}
