/* SPDX-License-Identifier: MIT */
/* Runs the real decapybara-run (built beside DECAPYBARA_ENGINE) on the real-heads checkpoint:
 * its greedy tokens and logits against the transformers goldens, the logits file's size, seeded
 * sampling, and errors. Logit rows must be within a relative error (||a - b|| / ||b||) of 1e-4. */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

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

static char *
model_dir (void)
{
  return g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
}

static void
run_tool (RunResult *r, const char *first_arg, ...)
{
  g_autofree char *dir = g_path_get_dirname (g_getenv ("DECAPYBARA_ENGINE"));
  g_autofree char *tool = g_build_filename (dir, "decapybara-run", NULL);
  /* the test checkpoints have no tokenizer files of their own */
  g_autofree char *tokenizer = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  va_list ap;

  g_ptr_array_add (argv, tool);
  g_ptr_array_add (argv, (gpointer) "--tokenizer");
  g_ptr_array_add (argv, tokenizer);
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

/* "a,b,c" of the golden prompt.json arrays named, concatenated; greedy without its last. */
static char *
golden_ids (gboolean prompt, gboolean decode, gboolean greedy_but_last, guint *count)
{
  g_autofree char *dir = model_dir ();
  g_autofree char *path = g_build_filename (dir, "golden", "prompt.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  GString *s = g_string_new (NULL);
  const char *members[] = { prompt ? "prompt" : NULL, decode ? "decode" : NULL,
                            greedy_but_last ? "greedy" : NULL };
  JsonObject *o;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  o = json_node_get_object (json_parser_get_root (parser));
  *count = 0;
  for (guint m = 0; m < G_N_ELEMENTS (members); m++)
    {
      JsonArray *a;
      guint n;

      if (members[m] == NULL)
        continue;
      a = json_object_get_array_member (o, members[m]);
      n = json_array_get_length (a) - (m == 2 ? 1 : 0);
      for (guint i = 0; i < n; i++)
        g_string_append_printf (s, "%s%" G_GINT64_FORMAT, s->len > 0 ? "," : "",
                                json_array_get_int_element (a, i));
      *count += n;
    }
  return g_string_free (s, FALSE);
}

static void
test_greedy (void)
{
  g_autofree char *dir = model_dir ();
  guint n, n_greedy;
  g_autofree char *ids = golden_ids (TRUE, TRUE, FALSE, &n);
  g_autofree char *greedy = golden_ids (FALSE, FALSE, TRUE, &n_greedy);   /* all but the last */
  g_auto(RunResult) r = { 0 };

  g_assert_cmpuint (n_greedy, ==, 15);
  run_tool (&r, "--model", dir, "--ids", ids, "--generate", "16", "--threads", "2", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_str_has_prefix (r.out, greedy));
  g_assert_cmpuint (strlen (r.out), >, strlen (greedy) + 2);
  g_assert_cmpint (r.out[strlen (greedy)], ==, ',');
  /* the golden's last token: 113 */
  g_assert_cmpstr (r.out + strlen (greedy), ==, ",113\n");
}

static void
test_logits (void)
{
  g_autofree char *dir = model_dir ();
  g_autofree char *golden_path = g_build_filename (dir, "golden", "full.f32", NULL);
  g_autofree char *out_path = NULL;
  g_autofree float *ours = NULL, *golden = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(RunResult) r = { 0 };
  guint n, V = 512;
  g_autofree char *ids = golden_ids (TRUE, TRUE, TRUE, &n);
  gsize len, golden_len;
  int fd = g_file_open_tmp ("dcp-run-XXXXXX.f32", &out_path, &error);

  g_assert_no_error (error);
  close (fd);
  run_tool (&r, "--model", dir, "--ids", ids, "--logits", out_path, "--prefill-chunk", "7", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_file_get_contents (out_path, (char **) &ours, &len, &error);
  g_assert_no_error (error);
  g_file_get_contents (golden_path, (char **) &golden, &golden_len, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (len, ==, (gsize) n * V * 4);
  g_assert_cmpuint (golden_len, ==, len);
  for (guint t = 0; t < n; t++)
    {
      double d = 0, nb = 0;

      for (guint i = 0; i < V; i++)
        {
          double x = (double) ours[t * V + i] - golden[t * V + i];
          d += x * x;
          nb += (double) golden[t * V + i] * golden[t * V + i];
        }
      g_assert_cmpfloat (sqrt (d / nb), <=, 1e-4);
    }

  /* with --generate 3 the two tokens fed back add two rows */
  run_result_clear (&r);
  run_tool (&r, "--model", dir, "--ids", "1,2,3,4", "--logits", out_path, "--generate", "3", NULL);
  g_assert_cmpint (r.status, ==, 0);
  {
    g_autofree char *data = NULL;

    g_assert_true (g_file_get_contents (out_path, &data, &len, NULL));
    g_assert_cmpuint (len, ==, (gsize) 6 * V * 4);
  }
  g_unlink (out_path);
}

static void
test_seeded (void)
{
  g_autofree char *dir = model_dir ();
  g_auto(RunResult) a = { 0 };
  g_auto(RunResult) b = { 0 };
  g_auto(RunResult) c = { 0 };

  run_tool (&a, "--model", dir, "--ids", "5,6,7", "-n", "12", "--top-k", "50", "--seed", "7", NULL);
  run_tool (&b, "--model", dir, "--ids", "5,6,7", "-n", "12", "--top-k", "50", "--seed", "7", NULL);
  run_tool (&c, "--model", dir, "--ids", "5,6,7", "-n", "12", "--top-k", "50", "--seed", "8", NULL);
  g_assert_cmpint (a.status, ==, 0);
  g_assert_cmpstr (a.out, ==, b.out);
  g_assert_cmpstr (a.out, !=, c.out);
}

static void
test_errors (void)
{
  g_autofree char *dir = model_dir ();
  g_auto(RunResult) r = { 0 };

  run_tool (&r, "--model", dir, "--ids", "1,x", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "--ids"));
  run_result_clear (&r);
  run_tool (&r, "--model", dir, "--ids", "1,512", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "outside the vocabulary"));
  run_result_clear (&r);
  run_tool (&r, "--ids", "1", NULL);
  g_assert_cmpint (r.status, ==, 2);
  run_result_clear (&r);
  run_tool (&r, "--model", dir, "--ids", "1", "-n", "2", "--loop-guard", "sometimes", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "--loop-guard"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/decapybara-run/greedy", test_greedy);
  g_test_add_func ("/decapybara-run/logits", test_logits);
  g_test_add_func ("/decapybara-run/seeded", test_seeded);
  g_test_add_func ("/decapybara-run/errors", test_errors);
  return g_test_run ();
}
