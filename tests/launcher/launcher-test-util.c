/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "dcp-checksum.h"
#include "dcp-model-info.h"
#include "launcher-test-util.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

void
test_head_random (TestHead *h, GRand *rand)
{
  memset (h, 0, sizeof *h);
  h->text = (guint64) g_rand_double_range (rand, 10, 40) * GIB;
  h->embedding = (guint64) g_rand_int_range (rand, 500, 2600) << 20;
  h->lm_head = (guint64) g_rand_int_range (rand, 500, 2600) << 20;
  h->mtp = (guint64) g_rand_int_range (rand, 200, 900) << 20;
  h->vision = (guint64) g_rand_int_range (rand, 400, 1000) << 20;
  h->file = h->text + h->embedding + h->lm_head + h->mtp + h->vision + (1 << 20);
  h->with_accuracy = TRUE;
}

static JsonNode *
metadata (const TestHead *h)
{
  g_autofree char *config_path = g_test_build_filename (G_TEST_DIST, "model", "qwen3.6-27b-config.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autofree char *template = g_strnfill (h->padding, 'x');

  g_assert_true (json_parser_load_from_file (parser, config_path, NULL));
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architecture");
  json_builder_add_string_value (b, "qwen3_5");
  json_builder_set_member_name (b, "config");
  json_builder_add_value (b, json_node_copy (json_parser_get_root (parser)));
  json_builder_set_member_name (b, "chat_template");
  json_builder_add_string_value (b, template);
  json_builder_set_member_name (b, "tokenizer_config");
  json_builder_begin_object (b);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "generation");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "recipe");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, "medium");
  json_builder_end_object (b);
  json_builder_set_member_name (b, "sizes");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "text");
  json_builder_add_int_value (b, h->text);
  json_builder_set_member_name (b, "embedding");
  json_builder_add_int_value (b, h->embedding);
  json_builder_set_member_name (b, "lm_head");
  json_builder_add_int_value (b, h->lm_head);
  json_builder_set_member_name (b, "mtp");
  json_builder_add_int_value (b, h->mtp);
  json_builder_set_member_name (b, "vision");
  json_builder_add_int_value (b, h->vision);
  json_builder_set_member_name (b, "file");
  json_builder_add_int_value (b, h->file);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "source");
  json_builder_begin_object (b);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "accuracy");
  if (!h->with_accuracy)
    json_builder_add_null_value (b);
  else
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "tokens");
      json_builder_add_int_value (b, 65536);
      json_builder_set_member_name (b, "kl_divergence");
      json_builder_add_double_value (b, 0.0125);
      json_builder_set_member_name (b, "top1_agreement");
      json_builder_add_double_value (b, 0.975);
      json_builder_set_member_name (b, "perplexity");
      json_builder_add_double_value (b, 6.5);
      json_builder_set_member_name (b, "reference_perplexity");
      json_builder_add_double_value (b, 6.25);
      json_builder_set_member_name (b, "kv");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "4/4");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "kl_divergence");
      json_builder_add_double_value (b, 0.0375);
      json_builder_set_member_name (b, "top1_agreement");
      json_builder_add_double_value (b, 0.955);
      json_builder_set_member_name (b, "perplexity");
      json_builder_add_double_value (b, 6.75);
      json_builder_end_object (b);
      json_builder_end_object (b);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

GBytes *
test_head_build (const TestHead *h)
{
  g_autoptr(JsonNode) meta = metadata (h);
  g_autofree char *json = json_to_string (meta, FALSE);
  gsize len = strlen (json);
  DcpModelHeader header = { 0 };
  guint8 *bytes = g_malloc0 (DCP_MODEL_HEADER_SIZE + len);

  header.version_major = DCP_MODEL_VERSION_MAJOR;
  header.version_minor = DCP_MODEL_VERSION_MINOR;
  header.file_size = h->file;
  header.metadata_offset = DCP_MODEL_HEADER_SIZE;
  header.metadata_size = len;
  header.tokenizer_offset = header.index_offset = DCP_MODEL_HEADER_SIZE + len;
  header.alignment = DCP_MODEL_ALIGNMENT;
  header.data_offset = (DCP_MODEL_HEADER_SIZE + len + DCP_MODEL_ALIGNMENT - 1) / DCP_MODEL_ALIGNMENT * DCP_MODEL_ALIGNMENT;
  header.data_size = h->file - header.data_offset;
  header.metadata_checksum = dcp_checksum64 (json, len);
  dcp_model_header_encode (&header, bytes);
  memcpy (bytes + DCP_MODEL_HEADER_SIZE, json, len);
  return g_bytes_new_take (bytes, DCP_MODEL_HEADER_SIZE + len);
}

char *
test_head_write (const char *dir, const char *name, const TestHead *h)
{
  g_autoptr(GBytes) bytes = test_head_build (h);
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), NULL));
  return path;
}
