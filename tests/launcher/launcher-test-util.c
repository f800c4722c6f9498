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
  /* The 27B's config.json has the tower's position table size, which the trimmed test config
   * leaves out; without it the tower's working set could not be planned. */
  json_object_set_int_member (
      json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                     "vision_config"),
      "num_position_embeddings", 2304);
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

static GBytes *
head_from_metadata (JsonNode *meta, guint64 file_size)
{
  g_autofree char *json = json_to_string (meta, FALSE);
  gsize len = strlen (json);
  DcpModelHeader header = { 0 };
  guint8 *bytes = g_malloc0 (DCP_MODEL_HEADER_SIZE + len);

  header.version_major = DCP_MODEL_VERSION_MAJOR;
  header.version_minor = DCP_MODEL_VERSION_MINOR;
  header.file_size = file_size;
  header.metadata_offset = DCP_MODEL_HEADER_SIZE;
  header.metadata_size = len;
  header.tokenizer_offset = header.index_offset = DCP_MODEL_HEADER_SIZE + len;
  header.alignment = DCP_MODEL_ALIGNMENT;
  header.data_offset = (DCP_MODEL_HEADER_SIZE + len + DCP_MODEL_ALIGNMENT - 1) / DCP_MODEL_ALIGNMENT * DCP_MODEL_ALIGNMENT;
  header.data_size = file_size - header.data_offset;
  header.metadata_checksum = dcp_checksum64 (json, len);
  dcp_model_header_encode (&header, bytes);
  memcpy (bytes + DCP_MODEL_HEADER_SIZE, json, len);
  return g_bytes_new_take (bytes, DCP_MODEL_HEADER_SIZE + len);
}

GBytes *
test_head_build (const TestHead *h)
{
  g_autoptr(JsonNode) meta = metadata (h);

  return head_from_metadata (meta, h->file);
}

char *
test_head_write (const char *dir, const char *name, const TestHead *h)
{
  g_autoptr(GBytes) bytes = test_head_build (h);
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), NULL));
  return path;
}

void
test_drafter_for_27b (TestDrafter *d)
{
  static const guint taps[] = { 1, 16, 31, 46, 61 };

  memset (d, 0, sizeof *d);
  d->architecture = "qwen3_5";
  d->hidden_size = 5120;
  d->vocab_size = 248320;
  d->target_layers = 64;
  memcpy (d->layer_ids, taps, sizeof taps);
  d->n_layer_ids = G_N_ELEMENTS (taps);
  d->mean_accepted = -1;
  d->block_size = 16;
  d->layers = 5;
  d->kv_heads = 8;
  d->head_dim = 128;
  d->weights = (guint64) 3 * GIB / 2;
}

static void
add_uint (JsonBuilder *b, const char *name, guint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, (gint64) value);
}

GBytes *
test_drafter_build (const TestDrafter *d)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) meta = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architecture");
  json_builder_add_string_value (b, "dflash");
  json_builder_set_member_name (b, "drafter");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, "dflash");
  add_uint (b, "block_size", d->block_size);
  add_uint (b, "mask_token_id", 248070);
  json_builder_set_member_name (b, "target");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architecture");
  json_builder_add_string_value (b, d->architecture);
  add_uint (b, "hidden_size", d->hidden_size);
  add_uint (b, "vocab_size", d->vocab_size);
  add_uint (b, "num_hidden_layers", d->target_layers);
  json_builder_set_member_name (b, "layer_ids");
  json_builder_begin_array (b);
  for (guint i = 0; i < d->n_layer_ids; i++)
    json_builder_add_int_value (b, d->layer_ids[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, d->target_name ? d->target_name : "");
  json_builder_end_object (b);
  json_builder_set_member_name (b, "acceptance");
  if (d->mean_accepted < 0)
    json_builder_add_null_value (b);
  else
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "mean_accepted");
      json_builder_add_double_value (b, d->mean_accepted);
      add_uint (b, "block", d->block_size);
      json_builder_set_member_name (b, "measured_on");
      json_builder_add_string_value (b, "code prompts");
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "config");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architectures");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, "DFlashDraftModel");
  json_builder_end_array (b);
  add_uint (b, "hidden_size", d->hidden_size);
  add_uint (b, "num_hidden_layers", d->layers);
  add_uint (b, "num_attention_heads", 32);
  add_uint (b, "num_key_value_heads", d->kv_heads);
  add_uint (b, "head_dim", d->head_dim);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "sizes");
  json_builder_begin_object (b);
  add_uint (b, "layers", d->weights - 4096);
  add_uint (b, "gpu_weights", d->weights);
  add_uint (b, "tensors", d->weights);
  add_uint (b, "file", d->weights + (1 << 20));
  json_builder_end_object (b);
  json_builder_set_member_name (b, "recipe");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, "bf16");
  json_builder_end_object (b);
  json_builder_end_object (b);
  meta = json_builder_get_root (b);
  return head_from_metadata (meta, d->weights + (1 << 20));
}

char *
test_drafter_write (const char *dir, const char *name, const TestDrafter *d)
{
  g_autoptr(GBytes) bytes = test_drafter_build (d);
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (
      g_file_set_contents (path, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), NULL));
  return path;
}
