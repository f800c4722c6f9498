/* SPDX-License-Identifier: MIT */
/* The integrity monitor's findings in the engine state, which the D-Bus service mirrors
 * (IntegrityErrors, IntegrityError): a bit flipped in a weight of the embedded tiny model on the
 * CPU backend (test-only fault injection, weight-fault.h). */
#include "dcp-integrity-state.h"
#include "weight-fault.h"

static DcpModelSource *model;
static DcpBackend *backend;

typedef struct {
  char *tensor;
  gboolean healed;
  guint64 errors_then;
} Signalled;

static void
on_integrity_error (DcpEngineState *state, const char *tensor, gboolean healed, gpointer data)
{
  Signalled *got = data;

  g_free (got->tensor);
  got->tensor = g_strdup (tensor);
  got->healed = healed;
  g_object_get (state, "integrity-errors", &got->errors_then, NULL);
}

/* A damaged tensor found by the monitor becomes the engine state's integrity-errors property
 * (D-Bus IntegrityErrors) and its "integrity-error" signal (D-Bus IntegrityError). */
static void
test_engine_state (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpIntegrityMonitor) monitor = dcp_integrity_monitor_new (backend, model, 600, &error);
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  Signalled got = { 0 };
  guint64 errors = 1;
  gint64 deadline;
  guint watch;

  g_assert_no_error (error);
  watch = dcp_integrity_state_watch (monitor, state);
  g_signal_connect (state, "integrity-error", G_CALLBACK (on_integrity_error), &got);
  weight_fault_flip_bit (model, "layers.1.mlp.gate_proj.weight", 6);
  g_test_expect_message ("dcp-integrity", G_LOG_LEVEL_WARNING, "*“layers.1.mlp.gate_proj.weight”*");
  dcp_integrity_monitor_sweep (monitor, &error);
  g_assert_no_error (error);
  g_test_assert_expected_messages ();
  g_object_get (state, "integrity-errors", &errors, NULL);
  g_assert_cmpuint (errors, ==, 0);   /* shown on the main context's next refresh */
  deadline = g_get_monotonic_time () + 5 * G_TIME_SPAN_SECOND;
  while (got.tensor == NULL && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpstr (got.tensor, ==, "layers.1.mlp.gate_proj.weight");
  g_assert_true (got.healed);
  g_assert_cmpuint (got.errors_then, ==, 1);
  g_source_remove (watch);
  g_free (got.tensor);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  backend = weight_fault_open_cpu ("DECAPYBARA_TINY_MODEL", &model);
  g_test_add_func ("/integrity/cpu/engine-state", test_engine_state);
  status = g_test_run ();
  g_object_unref (backend);
  dcp_model_source_free (model);
  return status;
}
