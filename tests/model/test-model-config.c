/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-model-config.h"

static void
load_model (const char *name, DcpModelConfig *c)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "models", name, "config.json", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_model_config_load (c, path, &error));
  g_assert_no_error (error);
}

static void
test_test_models (void)
{
  DcpModelConfig c;

  load_model ("real-heads", &c);
  g_assert_cmpuint (c.hidden_size, ==, 128);
  g_assert_cmpuint (c.head_dim, ==, 256);
  g_assert_cmpuint (c.rotary_dim, ==, 64);
  g_assert_cmpuint (c.linear_n_value_heads / c.linear_n_key_heads, ==, 3);
  g_assert_true (!c.is_full_attention[0] && !c.is_full_attention[2] && c.is_full_attention[3]);
  g_assert_cmpfloat (c.rope_theta, ==, 1e7);
  g_assert_cmpuint (c.mtp_n_layers, ==, 0);

  load_model ("odd-sizes", &c);
  g_assert_cmpuint (c.n_layers, ==, 8);
  g_assert_cmpuint (dcp_model_config_n_full_attention (&c), ==, 2);
  g_assert_cmpuint (c.rotary_dim, ==, 8);
  g_assert_cmpuint (c.linear_key_head_dim, ==, 24);
  g_assert_cmpuint (c.linear_value_head_dim, ==, 40);
}

/* The 27B's config as Qwen ships it (docs/MODEL.md §1.1): nested under text_config. */
static const char *qwen_27b =
  "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],\"model_type\":\"qwen3_5\","
  "\"vision_config\":{\"depth\":27,\"hidden_size\":1152},"
  "\"text_config\":{\"vocab_size\":248320,\"hidden_size\":5120,\"intermediate_size\":17408,"
  "\"num_hidden_layers\":64,\"num_attention_heads\":24,\"num_key_value_heads\":4,\"head_dim\":256,"
  "\"linear_num_key_heads\":16,\"linear_num_value_heads\":48,\"linear_key_head_dim\":128,"
  "\"linear_value_head_dim\":128,\"linear_conv_kernel_dim\":4,\"full_attention_interval\":4,"
  "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":262144,\"mtp_num_hidden_layers\":1,"
  "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000,"
  "\"partial_rotary_factor\":0.25,\"mrope_section\":[11,11,10],\"mrope_interleaved\":true}}}";

static gboolean
parse (const char *text, DcpModelConfig *c, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();

  g_assert_true (json_parser_load_from_data (parser, text, -1, NULL));
  return dcp_model_config_from_json (c, json_parser_get_root (parser), error);
}

static void
test_27b (void)
{
  DcpModelConfig c;
  g_autoptr(GError) error = NULL;

  g_assert_true (parse (qwen_27b, &c, &error));
  g_assert_cmpuint (c.n_layers, ==, 64);
  g_assert_cmpuint (dcp_model_config_n_full_attention (&c), ==, 16);
  g_assert_true (c.is_full_attention[63] && !c.is_full_attention[62]);
  g_assert_cmpuint (c.mtp_n_layers, ==, 1);
  g_assert_true (c.has_vision);
  g_assert_cmpuint (c.mrope_section[0], ==, 11);
}

/* YaRN's fields as the model card writes them for 1M tokens, and the defaults of the rest. */
static void
test_27b_yarn (void)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) parts = g_strsplit (qwen_27b, "\"rope_type\":\"default\"", 2);
  DcpModelConfig c;

  g_assert_true (parse (qwen_27b, &c, &error));
  g_assert_cmpint (c.rope_type, ==, DCP_ROPE_DEFAULT);
  text = g_strjoin ("\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":262144",
                    parts[0], parts[1], NULL);
  g_assert_true (parse (text, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpint (c.rope_type, ==, DCP_ROPE_YARN);
  g_assert_cmpfloat (c.rope_factor, ==, 4.0);
  g_assert_cmpuint (c.rope_original_max_positions, ==, 262144);
  g_assert_cmpfloat (c.rope_beta_fast, ==, 32);
  g_assert_cmpfloat (c.rope_beta_slow, ==, 1);
  g_assert_cmpfloat (c.rope_attention_factor, ==, 0);
  g_assert_true (c.rope_truncate);
  g_assert_cmpfloat (c.rope_theta, ==, 1e7);
  g_assert_cmpuint (c.rotary_dim, ==, 64);
  g_assert_cmpuint (dcp_model_config_max_context (&c), ==, 1048576);
  g_assert_cmpuint (dcp_model_config_native_context (&c), ==, 262144);
}

static void
expect_field_error (const char *from, const char *to, const char *field)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) parts = g_strsplit (qwen_27b, from, 2);
  DcpModelConfig c;

  g_assert_cmpuint (g_strv_length (parts), ==, 2);
  text = g_strjoin (to, parts[0], parts[1], NULL);
  g_assert_false (parse (text, &c, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  if (strstr (error->message, field) == NULL)
    g_error ("“%s” does not name “%s”", error->message, field);
}

static void
test_bad_fields (void)
{
  expect_field_error ("\"hidden_size\":5120", "\"hidden_size\":\"big\"", "hidden_size");
  expect_field_error ("\"hidden_size\":5120,", "", "hidden_size");
  expect_field_error ("\"num_key_value_heads\":4", "\"num_key_value_heads\":5", "num_key_value_heads");
  expect_field_error ("\"linear_num_value_heads\":48", "\"linear_num_value_heads\":50", "linear_num_value_heads");
  expect_field_error ("\"num_hidden_layers\":64", "\"num_hidden_layers\":100000", "num_hidden_layers");
  expect_field_error ("[11,11,10]", "[11,11,11]", "mrope_section");
  expect_field_error ("[11,11,10]", "[11,{},10]", "mrope_section");
  expect_field_error ("\"mtp_num_hidden_layers\":1", "\"mtp_num_hidden_layers\":[]", "mtp_num_hidden_layers");
  expect_field_error ("\"rope_type\":\"default\"", "\"rope_type\":\"linear\"", "rope_type");
  expect_field_error ("\"rope_type\":\"default\"", "\"rope_type\":\"yarn\"", "factor");
  expect_field_error ("\"rope_type\":\"default\"", "\"rope_type\":\"yarn\",\"factor\":-4", "factor");
  expect_field_error ("\"rope_type\":\"default\"", "\"rope_type\":\"yarn\",\"factor\":4,\"beta_slow\":-1",
                      "beta_slow");
  expect_field_error ("\"rope_type\":\"default\"", "\"rope_type\":\"yarn\",\"factor\":4,\"truncate\":1",
                      "truncate");
  expect_field_error ("\"head_dim\":256", "\"head_dim\":4096", "partial_rotary_factor");
  expect_field_error ("\"full_attention_interval\":4",
                      "\"layer_types\":[\"full_attention\"]", "layer_types");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-config/test-models", test_test_models);
  g_test_add_func ("/model-config/27b", test_27b);
  g_test_add_func ("/model-config/27b-yarn", test_27b_yarn);
  g_test_add_func ("/model-config/bad-fields", test_bad_fields);
  return g_test_run ();
}
