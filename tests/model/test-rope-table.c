/* SPDX-License-Identifier: MIT */
/* engine/model/dcp-rope.c against the tables transformers computes (tests/data/rope/tables.json,
 * made by tests/models/make-rope-tables.py): default RoPE and YaRN with each of its fields, read
 * from the same config.json text by dcp_model_config_from_json. The inverse frequencies must
 * match transformers' FP32 ones to the bit and the attention factor to FP32 rounding: at a
 * position of 2^20, one ulp of a frequency near 1 moves the angle by 0.06 rad. */
#include "config.h"

#include <string.h>

#include "dcp-model-config.h"
#include "dcp-rope.h"

typedef struct {
  DcpModelConfig config;
  DcpRope want;
} Case;

static JsonObject *
find_case (JsonParser *parser, const char *name)
{
  JsonArray *cases = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "cases");

  for (guint i = 0; i < json_array_get_length (cases); i++)
    {
      JsonObject *o = json_array_get_object_element (cases, i);
      if (g_str_equal (json_object_get_string_member (o, "name"), name))
        return o;
    }
  g_error ("no case %s in tables.json", name);
}

static void
load_case (const char *name, Case *out)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "rope", "tables.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *o;
  JsonArray *inv;

  g_assert_true (json_parser_load_from_mapped_file (parser, path, &error));
  o = find_case (parser, name);
  g_assert_true (dcp_model_config_from_json (&out->config, json_object_get_member (o, "config"), &error));
  g_assert_no_error (error);
  inv = json_object_get_array_member (o, "inv_freq");
  memset (&out->want, 0, sizeof out->want);
  out->want.n_pairs = json_array_get_length (inv);
  g_assert_cmpuint (out->want.n_pairs, <=, G_N_ELEMENTS (out->want.inv_freq));
  for (guint i = 0; i < out->want.n_pairs; i++)
    out->want.inv_freq[i] = (float) json_array_get_double_element (inv, i);
  out->want.attention_factor = (float) json_object_get_double_member (o, "attention_factor");
}

static void
assert_same_table (const DcpRope *got, const DcpRope *want)
{
  g_assert_cmpuint (got->n_pairs, ==, want->n_pairs);
  for (guint i = 0; i < want->n_pairs; i++)
    if (got->inv_freq[i] != want->inv_freq[i])
      g_error ("inv_freq[%u] = %.9g, transformers %.9g", i, got->inv_freq[i], want->inv_freq[i]);
  g_assert_cmpfloat (got->attention_factor, ==, want->attention_factor);
}

static void
test_case (gconstpointer data)
{
  Case c;
  DcpRope got;

  load_case (data, &c);
  dcp_rope_init (&got, &c.config);
  assert_same_table (&got, &c.want);
}

/* --rope-scaling 1m on the 27B as it ships gives the table of the config the model card asks
 * for, and the 1M context. */
static void
test_enable_yarn (void)
{
  Case shipped, card;
  DcpRope got;

  load_case ("qwen3.6-27b-default", &shipped);
  load_case ("qwen3.6-27b-yarn-1m", &card);
  g_assert_cmpuint (dcp_model_config_native_context (&shipped.config), ==, 262144);
  g_assert_cmpuint (dcp_model_config_max_context (&shipped.config), ==, 262144);
  dcp_model_config_enable_yarn (&shipped.config, DCP_ROPE_YARN_FACTOR);
  dcp_rope_init (&got, &shipped.config);
  assert_same_table (&got, &card.want);
  g_assert_cmpuint (dcp_model_config_native_context (&shipped.config), ==, 262144);
  g_assert_cmpuint (dcp_model_config_max_context (&shipped.config), ==, 1048576);
  g_assert_cmpuint (dcp_model_config_max_context (&card.config), ==, 1048576);

  /* A config that already asks for YaRN keeps its own. */
  dcp_model_config_enable_yarn (&card.config, 2.0);
  dcp_rope_init (&got, &card.config);
  assert_same_table (&got, &card.want);
}

int
main (int argc, char **argv)
{
  static const char *cases[] = { "qwen3.6-27b-default", "qwen3.6-27b-yarn-1m", "betas-no-truncate",
                                 "mscale", "null-factor-attention-factor", "tiny-original" };

  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/rope-table/%s", cases[i]);
      g_test_add_data_func (path, cases[i], test_case);
    }
  g_test_add_func ("/rope-table/enable-yarn", test_enable_yarn);
  return g_test_run ();
}
