/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dcp-backend-open.h"
#include "dcp-integrity-monitor.h"
#include "weight-fault.h"

#define FLIPPED "visual.blocks.0.attn.qkv.weight"

void
weight_fault_flip_bit (DcpModelSource *model, const char *name, guint bit)
{
  DcpTensorSource source = dcp_model_source_get_tensors (model);
  const DcpTensorView *view = dcp_tensor_source_lookup (&source, name);
  gsize page = (gsize) sysconf (_SC_PAGESIZE);
  guint8 *p, *start;
  int rc;

  g_assert_nonnull (view);
  /* An odd byte mid-tensor: the high byte of a BF16 weight, bit 6 its exponent's top bit. */
  p = (guint8 *) view->data + (view->nbytes / 2 | 1);
  start = (guint8 *) ((guintptr) p / page * page);
  rc = mprotect (start, page, PROT_READ | PROT_WRITE);
  g_assert_cmpint (rc, ==, 0);
  *p ^= (guint8) (1u << bit);
  rc = mprotect (start, page, PROT_READ);
  g_assert_cmpint (rc, ==, 0);
}

/* The tensor's bytes read from the file, that bit flipped in them, written over the weights'
 * copy by their own restore. */
static void
flip_copy (const DcpIntegrityWeights *weights, DcpModelSource *model, const char *name, guint bit)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = dcp_model_source_read_tensor (model, name, &error);
  g_autofree guint8 *flipped = NULL;
  guint n = weights->count (weights->data), index = 0;
  guint64 nbytes = 0;
  gsize size = 0;
  gboolean ok;

  g_assert_no_error (error);
  while (index < n && !g_str_equal (weights->name (weights->data, index, &nbytes), name))
    index++;
  g_assert_cmpuint (index, <, n);
  flipped = g_bytes_unref_to_data (g_steal_pointer (&bytes), &size);
  flipped[size / 2 | 1] ^= (guint8) (1u << bit);
  ok = weights->restore (weights->data, index, flipped, size, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
}

DcpBackend *
weight_fault_open_cpu (const char *env, DcpModelSource **model)
{
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;
  DcpBackend *backend;

  *model = dcp_model_source_open (g_getenv (env), NULL, &error);
  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (*model);
  backend = dcp_backend_open ("cpu", dcp_model_source_get_config (*model), &source, 1, &error);
  g_assert_no_error (error);
  return backend;
}

/* The tower's output for the 200x60 test image: its tokens x the model's hidden size. */
static GByteArray *
embeddings (DcpPromptVision *vision, DcpModelSource *model)
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

/* ||a - b|| / ||b|| over two arrays of floats of one length. */
static double
rel_error (const GByteArray *a, const GByteArray *b)
{
  const float *x = (const float *) a->data, *y = (const float *) b->data;
  double diff = 0, norm = 0;

  for (guint i = 0; i < b->len / sizeof (float); i++)
    {
      diff += ((double) x[i] - y[i]) * ((double) x[i] - y[i]);
      norm += (double) y[i] * y[i];
    }
  return sqrt (diff / MAX (norm, 1e-30));
}

void
weight_fault_check_tower (DcpBackend *backend, DcpModelSource *model, DcpPromptVision *vision,
                          gboolean copy, double bar)
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
  dcp_prompt_vision_get_weights (vision, &tower);
  added = dcp_integrity_monitor_add_weights (monitor, &tower);
  /* patch embedding and position table, 2 blocks of 2 norms and 4 linears, the merger's norm
   * and 2 linears: weights and biases */
  g_assert_cmpuint (added, ==, 2 + 1 + 2 * (2 * 2 + 4 * 2) + 2 + 2 * 2);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.n_tensors, ==, text_tensors + added);

  before = embeddings (vision, model);
  g_assert_true (dcp_integrity_monitor_sweep (monitor, &error));
  g_assert_no_error (error);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 0);

  if (copy)
    flip_copy (&tower, model, FLIPPED, 6);
  else
    weight_fault_flip_bit (model, FLIPPED, 6);
  flipped = embeddings (vision, model);
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

  after = embeddings (vision, model);
  g_assert_cmpuint (after->len, ==, before->len);
  if (memcmp (after->data, before->data, before->len) != 0)
    g_test_message ("embeddings after the restore: not bit-identical, relative difference %.2e",
                    rel_error (after, before));
  g_assert_cmpfloat (rel_error (after, before), <=, bar);
  g_assert_true (dcp_integrity_monitor_sweep (monitor, &error));
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 1);
}
