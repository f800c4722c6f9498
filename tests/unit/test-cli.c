/* SPDX-License-Identifier: MIT */
/* Runs the real `decapybara` binary (DECAPYBARA_ENGINE) and checks what a user sees. */
#include "config.h"

#include <gio/gio.h>
#include <json-glib/json-glib.h>

typedef struct {
  int status;
  char *out;
  char *err;
} RunResult;

static void
run_result_clear (RunResult *r)
{
  g_free (r->out);
  g_free (r->err);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (RunResult, run_result_clear)

static void
run_engine (RunResult *r, const char *first_arg, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  va_list ap;

  g_ptr_array_add (argv, (gpointer) g_getenv ("DECAPYBARA_ENGINE"));
  va_start (ap, first_arg);
  for (const char *a = first_arg; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);

  proc = g_subprocess_newv ((const char *const *) argv->pdata,
                            G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (proc, NULL, NULL, &r->out, &r->err, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (proc));
  r->status = g_subprocess_get_exit_status (proc);
}

static void
test_version (void)
{
  g_auto(RunResult) r = { 0 };

  run_engine (&r, "--version", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_str_has_prefix (r.out, "decapybara " PACKAGE_VERSION " "));
}

static void
test_help (void)
{
  g_auto(RunResult) r = { 0 };

  run_engine (&r, "--help", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "--probe"));
  g_assert_nonnull (strstr (r.out, "--version"));
}

static void
test_bad_option (void)
{
  g_auto(RunResult) r = { 0 };

  run_engine (&r, "--no-such-option", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "Unknown option --no-such-option"));
}

/* --probe --json always answers with an object: the GPU, or why there is none. */
static void
test_probe_json (void)
{
  g_auto(RunResult) r = { 0 };
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *o;

  run_engine (&r, "--probe", "--json", "--no-measure", NULL);
  g_assert_cmpint (r.status, ==, 0);
  json_parser_load_from_data (parser, r.out, -1, &error);
  g_assert_no_error (error);
  o = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_boolean_member (o, "cuda_build"), ==, HAVE_CUDA);
  if (json_object_get_boolean_member (o, "available"))
    {
      g_assert_cmpint (json_object_get_int_member (o, "total_bytes"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "peak_bandwidth_gbps"), >, 0);
    }
  else
    g_assert_cmpstr (json_object_get_string_member (o, "reason"), !=, "");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli/version", test_version);
  g_test_add_func ("/cli/help", test_help);
  g_test_add_func ("/cli/bad-option", test_bad_option);
  g_test_add_func ("/cli/probe-json", test_probe_json);
  return g_test_run ();
}
