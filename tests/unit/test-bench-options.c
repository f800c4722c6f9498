/* SPDX-License-Identifier: MIT */
/* decapybara-bench's option parsing (engine/tools/dcp-bench-options.c), on the CPU: defaults,
 * size lists with K/M suffixes, and an error naming the option for each kind of bad input. */
#include "config.h"

#include "dcp-error.h"
#include "tools/dcp-bench-options.h"

static gboolean
parse (DcpBenchOptions *o, GError **error, ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  char **argv;
  int argc;
  gboolean ok;
  va_list ap;

  g_ptr_array_add (args, g_strdup ("decapybara-bench"));
  va_start (ap, error);
  for (const char *a = va_arg (ap, const char *); a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (args, g_strdup (a));
  va_end (ap);
  /* GOption may reorder or drop entries of argv: parse a shallow copy */
  argc = (int) args->len;
  argv = g_new0 (char *, args->len + 1);
  memcpy (argv, args->pdata, args->len * sizeof (char *));
  ok = dcp_bench_options_parse (o, &argc, &argv, error);
  g_free (argv);
  return ok;
}

static guint
at (GArray *a, guint i)
{
  g_assert_cmpuint (i, <, a->len);
  return g_array_index (a, guint, i);
}

static void
test_defaults (void)
{
  g_auto(DcpBenchOptions) o;
  g_autoptr(GError) error = NULL;

  g_assert_true (parse (&o, &error, NULL));
  g_assert_no_error (error);
  g_assert_cmpuint (o.recipes->len, ==, DCP_RECIPE_N);
  g_assert_cmpint (g_array_index (o.recipes, DcpRecipe, 0), ==, DCP_RECIPE_TINY);
  g_assert_cmpint (g_array_index (o.recipes, DcpRecipe, 5), ==, DCP_RECIPE_BF16);
  g_assert_cmpuint (o.batches->len, ==, 4);
  g_assert_cmpuint (at (o.batches, 3), ==, 12);
  g_assert_cmpuint (o.contexts->len, ==, 3);
  g_assert_cmpuint (at (o.contexts, 0), ==, 1024);
  g_assert_cmpuint (at (o.contexts, 2), ==, 131072);
  g_assert_cmpuint (o.prefill->len, ==, 4);
  g_assert_cmpuint (at (o.prefill, 1), ==, 8192);
  g_assert_cmpuint (o.layers, ==, 64);
  g_assert_cmpuint (o.chunk, ==, 2048);
  g_assert_cmpuint (o.mixed, ==, 32768);
  g_assert_false (o.json);
  g_assert_false (o.fp8);
  g_assert_false (o.integrity);
  g_assert_false (o.yarn);
  g_assert_null (o.model);
}

static void
test_given (void)
{
  g_auto(DcpBenchOptions) o;
  g_autoptr(GError) error = NULL;

  g_assert_true (parse (&o, &error, "--recipe", "medium, BF16", "--layers", "16", "--batches",
                        "1,12", "--contexts", "1k,32K,1M", "--prefill", "none", "--steps", "7",
                        "--chunk", "256", "--mixed", "0", "--max-seconds", "2.5", "--json",
                        "--activations", "fp8", "--integrity", "--yarn", "--model", "demo.mcapy", NULL));
  g_assert_no_error (error);
  g_assert_cmpuint (o.recipes->len, ==, 2);
  g_assert_cmpint (g_array_index (o.recipes, DcpRecipe, 0), ==, DCP_RECIPE_MEDIUM);
  g_assert_cmpint (g_array_index (o.recipes, DcpRecipe, 1), ==, DCP_RECIPE_BF16);
  g_assert_cmpuint (o.layers, ==, 16);
  g_assert_cmpuint (o.batches->len, ==, 2);
  g_assert_cmpuint (at (o.batches, 1), ==, 12);
  g_assert_cmpuint (at (o.contexts, 0), ==, 1024);
  g_assert_cmpuint (at (o.contexts, 2), ==, 1048576);
  g_assert_cmpuint (o.prefill->len, ==, 0);
  g_assert_cmpuint (o.steps, ==, 7);
  g_assert_cmpuint (o.chunk, ==, 256);
  g_assert_cmpuint (o.mixed, ==, 0);
  g_assert_cmpfloat (o.max_seconds, ==, 2.5);
  g_assert_true (o.json);
  g_assert_true (o.fp8);
  g_assert_true (o.integrity);
  g_assert_true (o.yarn);
  g_assert_cmpstr (o.model, ==, "demo.mcapy");
}

static void
test_bad (void)
{
  static const struct { const char *option, *value, *named; } cases[] = {
    { "--recipe", "medium,huge", "huge" },
    { "--batches", "1,17", "--batches" },
    { "--batches", "0", "--batches" },
    { "--batches", "none", "--batches" },
    { "--contexts", "1K,,2K", "--contexts" },
    { "--contexts", "32Q", "--contexts" },
    { "--contexts", "2M", "--contexts" },
    { "--prefill", "-5", "--prefill" },
    { "--prefill", "K", "--prefill" },
    { "--layers", "0", "--layers" },
    { "--layers", "257", "--layers" },
    { "--layers", "many", "--layers" },
    { "--steps", "0", "--steps" },
    { "--chunk", "0", "--chunk" },
    { "--max-seconds", "0", "--max-seconds" },
    { "--tflops", "-1", "--tflops" },
    { "--activations", "fp16", "--activations" },
    { "--bogus", "1", "--bogus" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(DcpBenchOptions) o;
      g_autoptr(GError) error = NULL;

      g_test_message ("%s %s", cases[i].option, cases[i].value);
      g_assert_false (parse (&o, &error, cases[i].option, cases[i].value, NULL));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, cases[i].named));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/bench-options/defaults", test_defaults);
  g_test_add_func ("/bench-options/given", test_given);
  g_test_add_func ("/bench-options/bad", test_bad);
  return g_test_run ();
}
