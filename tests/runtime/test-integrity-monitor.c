/* SPDX-License-Identifier: MIT */
/* The integrity monitor on the CPU backend and the embedded tiny model: a bit flipped in a
 * weight tensor (the fault injection below, test-only) is found within one sweep, counted,
 * reported and restored from the model file; greedy output afterwards is what it was before.
 * Also: the 1% share of busy time, and the scheduler calling the monitor while idle. */
#include <string.h>

#include "dcp-error.h"
#include "dcp-integrity-monitor.h"
#include "dcp-model-source.h"
#include "dcp-scheduler.h"
#include "weight-fault.h"

#define N_PROMPT 12
#define N_GENERATE 12
#define FLIPPED "layers.0.mlp.down_proj.weight"

static DcpModelSource *model;
static DcpBackend *backend;
static guint vocab;

static guint32
argmax (const float *logits)
{
  guint32 best = 0;

  for (guint32 i = 1; i < vocab; i++)
    if (logits[i] > logits[best])
      best = i;
  return best;
}

static const guint32 *
prompt (void)
{
  static guint32 tokens[N_PROMPT];

  for (guint i = 0; i < N_PROMPT; i++)
    tokens[i] = 100 + 37 * i;
  return tokens;
}

/* Greedy tokens after the prompt, and the logits of the first one. */
static void
greedy (guint32 *tokens, float *first_logits)
{
  g_autoptr(GError) error = NULL;
  g_autofree float *logits = g_new (float, vocab);
  DcpSeqState *state = dcp_backend_state_new (backend, &error);
  DcpBatchItem item = { state, prompt (), N_PROMPT, DCP_LOGITS_LAST, logits };
  gboolean ok;

  g_assert_no_error (error);
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
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.n_tensors, >, 10);

  greedy (before, before_logits);
  /* A clean model: a whole sweep (idle, paced over one second) finds nothing. */
  dcp_integrity_monitor_between_steps (monitor, FALSE);
  do
    {
      now += 50 * G_TIME_SPAN_MILLISECOND;
      dcp_integrity_monitor_between_steps (monitor, FALSE);
      dcp_integrity_monitor_get_stats (monitor, &stats);
    }
  while (stats.sweeps == 0 && ++calls < 100);
  g_assert_cmpuint (stats.sweeps, ==, 1);
  g_assert_cmpuint (stats.tensors_checked, ==, stats.n_tensors);
  g_assert_cmpuint (stats.mismatches, ==, 0);

  weight_fault_flip_bit (model, FLIPPED, 6);
  greedy (flipped, flipped_logits);
  /* The flip is real: the model answers differently. */
  g_assert_true (memcmp (flipped_logits, before_logits, vocab * sizeof (float)) != 0);

  /* Found within the next sweep, reported (the log names it), restored. */
  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING,
                         "*“" FLIPPED "” does not match the model file's checksum*");
  calls = 0;
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
  g_assert_cmpuint (stats.heal_failures, ==, 0);
  events = dcp_integrity_monitor_take_events (monitor);
  g_assert_cmpuint (events->len, ==, 1);
  g_assert_cmpstr (((DcpIntegrityEvent *) g_ptr_array_index (events, 0))->tensor, ==, FLIPPED);
  g_assert_true (((DcpIntegrityEvent *) g_ptr_array_index (events, 0))->healed);
  g_clear_pointer (&events, g_ptr_array_unref);
  events = dcp_integrity_monitor_take_events (monitor);
  g_assert_cmpuint (events->len, ==, 0);

  greedy (after, after_logits);
  g_assert_cmpmem (after, sizeof after, before, sizeof before);
  g_assert_cmpmem (after_logits, vocab * sizeof (float), before_logits, vocab * sizeof (float));

  /* And a full sweep now finds it intact. */
  dcp_integrity_monitor_sweep (monitor, &error);
  g_assert_no_error (error);
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 1);
}

static gboolean
file_checksum (gpointer data, const char *name, guint64 *sum)
{
  return dcp_model_source_get_checksum (data, name, sum);
}

static GBytes *
unreadable (gpointer data, const char *name, GError **error)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "the disk is gone");
  return NULL;
}

/* A tensor that cannot be read again is reported as not healed, with the reason. */
static void
test_heal_fails (void)
{
  DcpIntegrityReference reference = { file_checksum, unreadable, model };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpIntegrityMonitor) monitor = dcp_integrity_monitor_new_full (backend, &reference, 1,
                                                                           &error);
  g_autoptr(GPtrArray) events = NULL;
  DcpIntegrityStats stats;

  g_assert_no_error (error);
  weight_fault_flip_bit (model, "layers.0.mlp.gate_proj.weight", 5);
  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING, "*“layers.0.mlp.gate_proj.weight” does not match*");
  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING,
                         "*“layers.0.mlp.gate_proj.weight” could not be restored: the disk is gone*");
  dcp_integrity_monitor_sweep (monitor, &error);
  g_assert_no_error (error);
  g_test_assert_expected_messages ();
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_assert_cmpuint (stats.mismatches, ==, 1);
  g_assert_cmpuint (stats.healed, ==, 0);
  g_assert_cmpuint (stats.heal_failures, ==, 1);
  events = dcp_integrity_monitor_take_events (monitor);
  g_assert_cmpuint (events->len, ==, 1);
  g_assert_false (((DcpIntegrityEvent *) g_ptr_array_index (events, 0))->healed);
  /* Put right for the tests that follow. */
  weight_fault_flip_bit (model, "layers.0.mlp.gate_proj.weight", 5);
}

/* While steps run, checking takes at most 1% of the time (one tensor's worth of overshoot). */
static void
test_busy_share (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpIntegrityMonitor) monitor = dcp_integrity_monitor_new (backend, model, 1, &error);
  gint64 now = 0, elapsed = 20 * G_TIME_SPAN_SECOND;
  DcpIntegrityStats stats;

  g_assert_no_error (error);
  dcp_integrity_monitor_set_clock (monitor, fake_now, &now);
  dcp_integrity_monitor_between_steps (monitor, TRUE);
  /* 10 ms steps for 20 s: 200 ms of checking allowed. */
  while (now < elapsed)
    {
      now += 10 * G_TIME_SPAN_MILLISECOND;
      dcp_integrity_monitor_between_steps (monitor, TRUE);
    }
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_test_message ("busy: %" G_GINT64_FORMAT " us of checking in %" G_GINT64_FORMAT " us, %"
                  G_GUINT64_FORMAT " sweeps", stats.check_us, elapsed, stats.sweeps);
  g_assert_cmpint (stats.check_us, <=, elapsed / 100 + 200 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpuint (stats.tensors_checked, >, 0);
}

/* ---- through the scheduler's loop ---- */

typedef struct {
  GMutex lock;
  GCond cond;
  GArray *tokens;
  gboolean done;
} Collected;

static void
on_token (gpointer data, guint32 token)
{
  Collected *c = data;

  g_array_append_val (c->tokens, token);
}

static void
on_finished (gpointer data, DcpSeqFinishReason reason, const DcpSeqUsage *usage,
             const GError *error)
{
  Collected *c = data;

  g_assert_cmpint (reason, ==, DCP_SEQ_FINISH_LENGTH);
  g_mutex_lock (&c->lock);
  c->done = TRUE;
  g_cond_signal (&c->cond);
  g_mutex_unlock (&c->lock);
}

static gpointer
engine_thread (gpointer sched)
{
  dcp_scheduler_run (sched);
  return NULL;
}

/* The scheduler calls the monitor's hook while idle: a flip made before it starts is healed
 * within the (one second) sweep, and a request served afterwards answers as before. */
static void
test_scheduler_hook (void)
{
  static const DcpSeqCallbacks callbacks = { NULL, on_token, on_finished };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpIntegrityMonitor) monitor = dcp_integrity_monitor_new (backend, model, 1, &error);
  g_autofree float *logits = g_new (float, vocab);
  g_autoptr(DcpScheduler) sched = NULL;
  guint32 before[N_GENERATE];
  Collected c = { 0 };
  DcpSchedulerConfig config;
  DcpIntegrityStats stats;
  DcpSeqParams p = { 0 };
  GThread *thread;
  gint64 deadline;

  g_assert_no_error (error);
  greedy (before, logits);
  dcp_scheduler_config_init (&config);
  config.page_tokens = 16;
  config.kv_pages = 16;
  config.step_hook = dcp_integrity_monitor_get_hook (monitor);
  sched = dcp_scheduler_new (backend, &config, &error);
  g_assert_no_error (error);
  weight_fault_flip_bit (model, "layers.1.mlp.up_proj.weight", 6);
  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING, "*“layers.1.mlp.up_proj.weight”*");
  thread = g_thread_new ("engine", engine_thread, sched);

  deadline = g_get_monotonic_time () + 30 * G_TIME_SPAN_SECOND;
  do
    {
      g_usleep (20 * G_TIME_SPAN_MILLISECOND);
      dcp_integrity_monitor_get_stats (monitor, &stats);
    }
  while (stats.healed == 0 && g_get_monotonic_time () < deadline);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (stats.mismatches, ==, 1);
  g_assert_cmpuint (stats.healed, ==, 1);

  g_mutex_init (&c.lock);
  g_cond_init (&c.cond);
  c.tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  dcp_sampler_params_init (&p.sampling);
  p.sampling.temperature = 0;
  p.prompt = prompt ();
  p.n_prompt = N_PROMPT;
  p.max_tokens = N_GENERATE;
  dcp_scheduler_submit (sched, &p, &callbacks, &c, &error);
  g_assert_no_error (error);
  g_mutex_lock (&c.lock);
  while (!c.done)
    g_cond_wait (&c.cond, &c.lock);
  g_mutex_unlock (&c.lock);
  dcp_scheduler_stop (sched);
  g_thread_join (thread);
  g_assert_cmpmem (c.tokens->data, c.tokens->len * sizeof (guint32), before, sizeof before);
  g_array_unref (c.tokens);
  g_mutex_clear (&c.lock);
  g_cond_clear (&c.cond);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  backend = weight_fault_open_cpu ("DECAPYBARA_TINY_MODEL", &model);
  vocab = dcp_backend_get_config (backend)->vocab_size;
  g_test_add_func ("/integrity/cpu/flip-found-and-healed", test_flip_found_and_healed);
  g_test_add_func ("/integrity/cpu/heal-fails", test_heal_fails);
  g_test_add_func ("/integrity/cpu/busy-share", test_busy_share);
  g_test_add_func ("/integrity/cpu/scheduler-hook", test_scheduler_hook);
  status = g_test_run ();
  g_object_unref (backend);
  dcp_model_source_free (model);
  return status;
}
