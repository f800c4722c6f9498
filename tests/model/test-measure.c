/* SPDX-License-Identifier: MIT */
/* decapybara-convert --measure on a committed checkpoint, on the CPU: the accuracy object is
 * written, every number in it is finite, and they order as they must (the bf16 recipe with a
 * BF16 cache is the reference itself: KL 0, full agreement, the same perplexity; a 4-bit cache
 * is no closer than an 8-bit one); --info prints the table. Also the CPU backend's KV rounding
 * against dcp-quant.h. */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "dcp-cpu-attention.h"
#include "dcp-model-file.h"
#include "dcp-quant.h"

static const char *kv_keys[] = { "16/16", "8/8", "6/6", "6/4", "4/4" };

/* A byte-level tokenizer of the 256 byte characters alone (ids 0..255, inside the test
 * models' vocabularies), with the real tokenizer_config.json beside it. */
static char *
byte_tokenizer_dir (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) json = g_string_new ("{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, "
                                          "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                          "\"trim_offsets\": false, \"use_regex\": false}, "
                                          "\"decoder\": {\"type\": \"ByteLevel\"}, "
                                          "\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
  g_autofree char *tc_from = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", "tokenizer_config.json", NULL);
  char *dir = g_dir_make_tmp ("dcp-measure-tok-XXXXXX", &error);
  g_autofree char *json_path = g_build_filename (dir, "tokenizer.json", NULL);
  g_autofree char *tc_path = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *tc = NULL;
  guint next = 256;

  g_assert_no_error (error);
  /* GPT-2's byte-to-character map: printable Latin-1 bytes stand for themselves, the others
   * take the characters from U+0100 on, in byte order. */
  for (guint b = 0; b < 256; b++)
    {
      gboolean printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
      gunichar c = printable ? b : next++;
      char utf8[8] = { 0 };

      g_unichar_to_utf8 (c, utf8);
      g_string_append_printf (json, "%s\"%s%s\": %u", b ? ", " : "", c == '"' || c == '\\' ? "\\" : "", utf8, b);
    }
  g_string_append (json, "}}}");
  g_file_set_contents (json_path, json->str, -1, &error);
  g_assert_no_error (error);
  g_file_get_contents (tc_from, &tc, NULL, &error);
  g_assert_no_error (error);
  g_file_set_contents (tc_path, tc, -1, &error);
  g_assert_no_error (error);
  return dir;
}

static void
remove_dir (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *p = g_build_filename (path, name, NULL);
      g_remove (p);
    }
  g_rmdir (path);
}

static char *
tool_path (void)
{
  g_autofree char *dir = g_path_get_dirname (g_getenv ("DECAPYBARA_ENGINE"));
  return g_build_filename (dir, "decapybara-convert", NULL);
}

static double
number (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  g_assert_nonnull (n);
  g_assert_true (JSON_NODE_HOLDS_VALUE (n));
  g_assert_true (isfinite (json_node_get_double (n)));
  return json_node_get_double (n);
}

/* Converts with --measure and returns the file's accuracy object (owned by file). */
static JsonObject *
convert_measured (const char *recipe, const char *dir, const char *tok, const char *text, DcpModelFile **file)
{
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "odd-sizes", NULL);
  g_autofree char *tool = tool_path ();
  g_autofree char *out = g_strdup_printf ("%s/%s.mcapy", dir, recipe);
  g_autofree char *recipe_arg = g_strconcat ("--recipe=", recipe, NULL);
  g_autofree char *tok_arg = g_strconcat ("--tokenizer=", tok, NULL);
  g_autofree char *measure_arg = g_strconcat ("--measure=", text, NULL);
  const char *argv[] = { tool, "-q", recipe_arg, tok_arg, measure_arg, "--measure-tokens=200", input, out, NULL };
  g_autoptr(GError) error = NULL;
  JsonNode *accuracy;
  int status = -1;

  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  *file = dcp_model_file_open (out, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_model_file_verify (*file, &error));
  g_assert_no_error (error);
  accuracy = json_object_get_member (dcp_model_file_get_metadata (*file), "accuracy");
  g_assert_nonnull (accuracy);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (accuracy));
  return json_node_get_object (accuracy);
}

static void
check_accuracy (JsonObject *a, gboolean is_reference)
{
  JsonObject *kv = json_object_get_object_member (a, "kv");
  double kl[G_N_ELEMENTS (kv_keys)], top1[G_N_ELEMENTS (kv_keys)];

  g_assert_cmpstr (json_object_get_string_member (a, "reference"), ==, "bf16");
  g_assert_cmpint (json_object_get_int_member (a, "tokens"), ==, 200);
  g_assert_cmpstr (json_object_get_string_member (a, "dataset"), ==, "text.txt");
  g_assert_cmpfloat (number (a, "reference_perplexity"), >, 1);
  g_assert_cmpuint (json_object_get_size (kv), ==, G_N_ELEMENTS (kv_keys));
  for (guint k = 0; k < G_N_ELEMENTS (kv_keys); k++)
    {
      JsonObject *e = json_object_get_object_member (kv, kv_keys[k]);

      g_assert_nonnull (e);
      kl[k] = number (e, "kl_divergence");
      top1[k] = number (e, "top1_agreement");
      g_assert_cmpfloat (kl[k], >=, 0);
      g_assert_cmpfloat (top1[k], >=, 0);
      g_assert_cmpfloat (top1[k], <=, 1);
      g_assert_cmpfloat (number (e, "perplexity"), >, 1);
    }
  /* The top level holds the 16/16 numbers. */
  g_assert_cmpfloat (number (a, "kl_divergence"), ==, kl[0]);
  g_assert_cmpfloat (number (a, "top1_agreement"), ==, top1[0]);
  if (is_reference)
    {
      g_assert_cmpfloat (kl[0], ==, 0);
      g_assert_cmpfloat (top1[0], ==, 1);
      g_assert_cmpfloat (number (a, "perplexity"), ==, number (a, "reference_perplexity"));
    }
  else
    g_assert_cmpfloat (kl[0], >, 0);
  /* Fewer KV bits are never closer: 8/8 rounds, 4/4 rounds more. */
  g_assert_cmpfloat (kl[1], >, 0);
  g_assert_cmpfloat (kl[4], >=, kl[1]);
  g_assert_cmpfloat (kl[4], >=, kl[3]);
}

static void
test_measure (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-measure-XXXXXX", &error);
  g_autofree char *tok = byte_tokenizer_dir ();
  g_autofree char *text_path = g_build_filename (dir, "text.txt", NULL);
  g_autofree char *tool = tool_path ();
  g_autofree char *bf16_path = NULL, *info = NULL;
  g_autoptr(DcpModelFile) bf16 = NULL, tiny = NULL;
  g_autoptr(GString) text = g_string_new (NULL);
  int status = -1;

  if (g_getenv ("DECAPYBARA_ENGINE") == NULL)
    {
      g_test_skip ("DECAPYBARA_ENGINE is not set");
      return;
    }
  g_assert_no_error (error);
  for (guint i = 0; i < 20; i++)
    g_string_append_printf (text, "def f%u(x):\n    return x * %u\n", i, i * 7);
  g_file_set_contents (text_path, text->str, -1, &error);
  g_assert_no_error (error);

  check_accuracy (convert_measured ("bf16", dir, tok, text_path, &bf16), TRUE);
  check_accuracy (convert_measured ("tiny", dir, tok, text_path, &tiny), FALSE);

  {
    const char *argv[] = { tool, "--info", dcp_model_file_get_path (bf16), NULL };

    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &info, NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_nonnull (strstr (info, "accuracy:      against bf16 on 200 tokens of text.txt"));
    g_assert_nonnull (strstr (info, "  16/16        0.000000  100.00%"));
    g_assert_nonnull (strstr (info, "  4/4 "));
  }
  g_clear_pointer (&bf16, dcp_model_file_free);
  g_clear_pointer (&tiny, dcp_model_file_free);

  /* A text of one token cannot be measured; the conversion fails and leaves no file. */
  {
    g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "odd-sizes", NULL);
    g_autofree char *out = g_build_filename (dir, "short.mcapy", NULL);
    g_autofree char *tok_arg = g_strconcat ("--tokenizer=", tok, NULL);
    g_autofree char *measure_arg = g_strconcat ("--measure=", text_path, NULL);
    g_autofree char *err = NULL;
    const char *argv[] = { tool, "-q", tok_arg, measure_arg, input, out, NULL };

    g_file_set_contents (text_path, "x", -1, &error);
    g_assert_no_error (error);
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err, &status, &error);
    g_assert_no_error (error);
    g_assert_false (g_spawn_check_wait_status (status, NULL));
    g_assert_nonnull (strstr (err, "at least 2 are needed"));
    g_assert_false (g_file_test (out, G_FILE_TEST_EXISTS));
  }
  remove_dir (dir);
  remove_dir (tok);
}

/* The cache's rounding is dcp-quant.h's: each head a row of blocks of 32. */
static void
test_kv_round (void)
{
  static const DcpDType formats[] = { DCP_DTYPE_MXFP8_E4M3, DCP_DTYPE_MXFP6_E2M3, DCP_DTYPE_MXFP4_E2M1 };
  float x[2 * 40], expect[2 * 40];
  guint8 q[256];

  for (guint f = 0; f < G_N_ELEMENTS (formats); f++)
    {
      for (guint i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = sinf (i * 0.37f) * (i < 40 ? 3.0f : 0.01f);
      dcp_quantize (formats[f], x, 2, 40, q);
      dcp_dequantize_rows (formats[f], q, 2, 40, 0, 2, expect);
      dcp_cpu_kv_round (formats[f], x, 2, 40);
      g_assert_cmpmem (x, sizeof x, expect, sizeof expect);
    }
  x[0] = 1.00390625f;   /* 1 + 2^-8: BF16 rounds it to 1 (ties to even) */
  dcp_cpu_kv_round (DCP_DTYPE_BF16, x, 1, 1);
  g_assert_cmpfloat (x[0], ==, 1.0f);
  x[0] = 1.00390625f;
  dcp_cpu_kv_round (DCP_DTYPE_F32, x, 1, 1);
  g_assert_cmpfloat (x[0], ==, 1.00390625f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/measure/kv-round", test_kv_round);
  g_test_add_func ("/measure/convert", test_measure);
  return g_test_run ();
}
