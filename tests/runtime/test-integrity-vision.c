/* SPDX-License-Identifier: MIT */
/* The integrity monitor over the vision tower's weights in RAM (the CPU tower of --vision, on
 * the tiny vision model's file): its tensors join the sweep; a bit flipped in one of its
 * matrices changes an image's embeddings, is found by the next sweep, reported and restored
 * from the model file, and the embeddings are then what they were. */
#include <string.h>

#include "dcp-error.h"
#include "dcp-integrity-monitor.h"
#include "dcp-model-source.h"
#include "dcp-prompt-vision.h"
#include "weight-fault.h"

#define FLIPPED "visual.blocks.0.attn.qkv.weight"

static DcpModelSource *model;
static DcpBackend *backend;
static DcpPromptVision *vision;

/* The tower's output for the 200x60 test image: its tokens x the hidden size. */
static GByteArray *
embeddings (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small",
                                                 "golden", "wide.png", NULL);
  g_autoptr(GPtrArray) images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(DcpPromptImages) out = NULL;
  g_autoptr(GError) error = NULL;
  guint32 image = dcp_prompt_vision_get_image_token (vision);
  guint hidden = dcp_model_source_get_config (model)->hidden_size;
  char *png = NULL;
  gsize len = 0;
  GByteArray *result;

  g_file_get_contents (path, &png, &len, &error);
  g_assert_no_error (error);
  g_ptr_array_add (images, g_bytes_new_take (png, len));
  g_array_append_val (ids, image);
  g_assert_true (dcp_prompt_vision_expand (vision, images, ids, &out, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (out->n_images, ==, 1);
  g_assert_cmpuint (ids->len, >, 1);
  result = g_byte_array_new ();
  g_byte_array_append (result, (const guint8 *) out->embeddings[0],
                       ids->len * hidden * sizeof (float));
  return result;
}

static void
test_tower_flip_found_and_healed (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpIntegrityMonitor) monitor = dcp_integrity_monitor_new (backend, model, 1, &error);
  g_autoptr(GByteArray) before = NULL, flipped = NULL, after = NULL;
  g_autoptr(GPtrArray) events = NULL;
  DcpIntegrityWeights tower;
  DcpIntegrityStats stats;
  DcpIntegrityEvent *event;
  guint text_tensors, added;

  g_assert_no_error (error);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  text_tensors = stats.n_tensors;
  g_assert_true (dcp_prompt_vision_get_weights (vision, &tower));
  added = dcp_integrity_monitor_add_weights (monitor, &tower);
  /* patch embedding and position table, 2 blocks of 2 norms and 4 linears, the merger's norm
   * and 2 linears: weights and biases */
  g_assert_cmpuint (added, ==, 2 + 1 + 2 * (2 * 2 + 4 * 2) + 2 + 2 * 2);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.n_tensors, ==, text_tensors + added);

  before = embeddings ();
  g_assert_true (dcp_integrity_monitor_sweep (monitor, &error));
  g_assert_no_error (error);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 0);

  weight_fault_flip_bit (model, FLIPPED, 6);
  flipped = embeddings ();
  g_assert_cmpuint (flipped->len, ==, before->len);
  g_assert_true (memcmp (flipped->data, before->data, before->len) != 0);

  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING,
                         "*“" FLIPPED "” does not match the model file's checksum*");
  g_assert_true (dcp_integrity_monitor_sweep (monitor, &error));
  g_assert_no_error (error);
  g_test_assert_expected_messages ();
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 1);
  g_assert_cmpuint (stats.healed, ==, 1);
  events = dcp_integrity_monitor_take_events (monitor);
  g_assert_cmpuint (events->len, ==, 1);
  event = g_ptr_array_index (events, 0);
  g_assert_cmpstr (event->tensor, ==, FLIPPED);
  g_assert_true (event->healed);

  after = embeddings ();
  g_assert_cmpmem (after->data, after->len, before->data, before->len);
  g_assert_true (dcp_integrity_monitor_sweep (monitor, &error));
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 1);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  backend = weight_fault_open_cpu ("DECAPYBARA_TINY_VISION_MODEL", &model);
  vision = dcp_prompt_vision_new (model, backend, 1, &error);
  g_assert_no_error (error);
  g_test_add_func ("/integrity/cpu/vision-tower-flip", test_tower_flip_found_and_healed);
  status = g_test_run ();
  dcp_prompt_vision_free (vision);
  g_object_unref (backend);
  dcp_model_source_free (model);
  return status;
}
