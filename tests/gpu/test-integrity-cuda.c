/* SPDX-License-Identifier: MIT */
/* The integrity monitor on the CUDA backend and the embedded tiny model (an .mcapy file with
 * checksums): a bit flipped in a weight tensor's VRAM (the test-only fault injection below) is
 * found within one sweep, counted, reported, and the tensor re-uploaded from the file; greedy
 * output afterwards is the output before the flip. The same for the vision tower on CUDA (the
 * tiny vision model): its weights in VRAM join the sweep, a bit flipped in one of its matrices
 * there is found, reported and re-uploaded. Needs a CUDA device (77 without one). */
#include "config.h"

#include <string.h>

#include "dcp-backend-cuda-private.h"
#include "dcp-integrity-monitor.h"
#include "dcp-kernels.h"
#include "dcp-model-source.h"
#include "../runtime/weight-fault.h"

#define N_PROMPT 12
#define N_GENERATE 12
#define FLIPPED "layers.0.mlp.down_proj.weight"

static DcpModelSource *model;
static DcpBackend *backend;
static guint vocab;

/* The fault injection: one bit of a byte mid-tensor in VRAM (its first range). */
static void
flip_vram_bit (const char *name, guint bit)
{
  GArray *stored = DCP_BACKEND_CUDA (backend)->weights->stored;
  guint8 byte = 0;
  int rc;

  for (guint i = 0; i < stored->len; i++)
    {
      const DcpCudaStoredTensor *t = &g_array_index (stored, DcpCudaStoredTensor, i);
      guint8 *d;

      if (!g_str_equal (t->name, name))
        continue;
      g_assert_cmpuint (t->n_ranges, >, 0);
      d = (guint8 *) t->data[0] + (t->nbytes[0] / 2 | 1);
      rc = dcpk_memcpy_d2h (&byte, d, 1);
      g_assert_cmpint (rc, ==, 0);
      byte ^= (guint8) (1u << bit);
      rc = dcpk_memcpy_h2d (d, &byte, 1);
      g_assert_cmpint (rc, ==, 0);
      return;
    }
  g_assert_not_reached ();
}

static guint32
argmax (const float *logits)
{
  guint32 best = 0;

  for (guint32 i = 1; i < vocab; i++)
    if (logits[i] > logits[best])
      best = i;
  return best;
}

/* Greedy tokens after a fixed prompt, and the logits of the first one. */
static void
greedy (guint32 *tokens, float *first_logits)
{
  g_autoptr(GError) error = NULL;
  g_autofree float *logits = g_new (float, vocab);
  guint32 prompt[N_PROMPT];
  DcpSeqState *state = dcp_backend_state_new (backend, &error);
  DcpBatchItem item = { state, prompt, N_PROMPT, DCP_LOGITS_LAST, logits };
  gboolean ok;

  g_assert_no_error (error);
  for (guint i = 0; i < N_PROMPT; i++)
    prompt[i] = 100 + 37 * i;
  ok = dcp_backend_forward (backend, &item, 1, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  memcpy (first_logits, logits, vocab * sizeof (float));
  for (guint i = 0; i < N_GENERATE; i++)
    {
      tokens[i] = argmax (logits);
      item.tokens = &tokens[i];
      item.n_tokens = 1;
      ok = dcp_backend_forward (backend, &item, 1, &error);
      g_assert_no_error (error);
      g_assert_true (ok);
    }
  dcp_backend_state_free (backend, state);
}

static gint64
fake_now (gpointer data)
{
  return *(gint64 *) data;
}

static void
test_flip_found_and_healed (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpIntegrityMonitor) monitor = dcp_integrity_monitor_new (backend, model, 1, &error);
  g_autofree float *before_logits = g_new (float, vocab);
  g_autofree float *flipped_logits = g_new (float, vocab);
  g_autofree float *after_logits = g_new (float, vocab);
  g_autoptr(GPtrArray) events = NULL;
  guint32 before[N_GENERATE], flipped[N_GENERATE], after[N_GENERATE];
  DcpIntegrityStats stats;
  gint64 now = 1000000;
  guint calls = 0;

  g_assert_no_error (error);
  dcp_integrity_monitor_set_clock (monitor, fake_now, &now);
  greedy (before, before_logits);
  dcp_integrity_monitor_sweep (monitor, &error);
  g_assert_no_error (error);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 0);
  g_test_message ("a sweep: %u tensors, %" G_GUINT64_FORMAT " bytes in %.3f ms", stats.n_tensors,
                  stats.sweep_bytes, stats.last_sweep_check_us / 1e3);

  flip_vram_bit (FLIPPED, 6);
  greedy (flipped, flipped_logits);
  g_assert_true (memcmp (flipped_logits, before_logits, vocab * sizeof (float)) != 0);

  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING,
                         "*“" FLIPPED "” does not match the model file's checksum*");
  do
    {
      now += 50 * G_TIME_SPAN_MILLISECOND;
      dcp_integrity_monitor_between_steps (monitor, FALSE);
      dcp_integrity_monitor_get_stats (monitor, &stats);
    }
  while (stats.sweeps == 1 && ++calls < 100);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (stats.sweeps, ==, 2);
  g_assert_cmpuint (stats.mismatches, ==, 1);
  g_assert_cmpuint (stats.healed, ==, 1);
  events = dcp_integrity_monitor_take_events (monitor);
  g_assert_cmpuint (events->len, ==, 1);
  g_assert_cmpstr (((DcpIntegrityEvent *) g_ptr_array_index (events, 0))->tensor, ==, FLIPPED);
  g_assert_true (((DcpIntegrityEvent *) g_ptr_array_index (events, 0))->healed);

  greedy (after, after_logits);
  g_assert_cmpmem (after, sizeof after, before, sizeof before);
}

/* tests/runtime/test-integrity-vision.c's check on the CUDA tower, the bit flipped in its VRAM
 * copy of the matrix; the embeddings after the restore within FP32 rounding of those before
 * (the kernels are deterministic; a difference is reported). */
static void
test_tower_flip_found_and_healed (void)
{
  g_autoptr(GError) error = NULL;
  DcpModelSource *vision_model =
      dcp_model_source_open (g_getenv ("DECAPYBARA_TINY_VISION_MODEL"), NULL, &error);
  DcpTensorSource source;
  DcpBackend *vision_backend;
  DcpPromptVision *vision;

  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (vision_model);
  vision_backend =
      dcp_backend_cuda_new (dcp_model_source_get_config (vision_model), &source, 4096, &error);
  g_assert_no_error (error);
  vision = dcp_prompt_vision_new (vision_model, vision_backend, 0, &error);
  g_assert_no_error (error);
  weight_fault_check_tower (vision_backend, vision_model, vision, TRUE, 1e-5);
  dcp_prompt_vision_free (vision);
  g_object_unref (vision_backend);
  dcp_model_source_free (vision_model);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;
  int status;

  g_test_init (&argc, &argv, NULL);
  if (!dcp_backend_cuda_available ())
    {
      g_print ("no CUDA device: skipped\n");
      return 77;
    }
  model = dcp_model_source_open (g_getenv ("DECAPYBARA_TINY_MODEL"), NULL, &error);
  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (model);
  backend = dcp_backend_cuda_new (dcp_model_source_get_config (model), &source, 4096, &error);
  g_assert_no_error (error);
  vocab = dcp_backend_get_config (backend)->vocab_size;
  g_test_add_func ("/gpu/integrity/flip-found-and-healed", test_flip_found_and_healed);
  g_test_add_func ("/gpu/integrity/vision-tower-flip", test_tower_flip_found_and_healed);
  status = g_test_run ();
  g_object_unref (backend);
  dcp_model_source_free (model);
  return status;
}
