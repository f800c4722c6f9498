/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-settings.h"

static void
test_every_key_round_trips (void)
{
  /* A valid non-default value for every key: set, read back, and through the command line. */
  static const struct {
    const char *key, *value;
  } cases[] = {
    { "model", "/models/qwen3.8-27b-medium.mcapy" },
    { "host", "0.0.0.0" },
    { "port", "9000" },
    { "api-key", "s3cret key" },
    { "http-max-connections", "64" },
    { "http-header-timeout", "5" },
    { "http-idle-timeout", "120" },
    { "http-body-timeout", "300" },
    { "allow-image-urls", "on" },
    { "image-url-timeout", "30" },
    { "context-mode", "fixed" },
    { "conversations", "12" },
    { "context", "131072" },
    { "kv-bits", "6/4" },
    { "rope-scaling", "1m" },
    { "activations", "fp8" },
    { "speculator", "mtp" },
    { "draft-length", "5" },
    { "drafter", "/models/qwen3.8-27b-dflash.mcapy" },
    { "prefill-policy", "decode-priority" },
    { "prefill-chunk", "4096" },
    { "loop-guard", "end-thinking" },
    { "vision", "fp8" },
    { "ram-cache", "auto" },
    { "disk-cache", "64" },
    { "disk-cache-dir", "/fast disk/states" },
    { "keep-free", "1.5" },
    { "integrity-interval", "0" },
    { "backend", "cpu" },
  };
  g_auto(DcpSettings) s = { 0 };
  g_auto(DcpSettings) back = { 0 };
  g_autofree char *line = NULL;
  g_auto(GStrv) argv = NULL;
  int argc = 0;

  g_assert_cmpuint (dcp_settings_count (), ==, G_N_ELEMENTS (cases));
  dcp_settings_init_default (&s);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *got = NULL;

      g_assert_cmpstr (dcp_settings_info (i)->key, ==, cases[i].key);
      g_assert_true (dcp_settings_set (&s, cases[i].key, cases[i].value, &error));
      g_assert_no_error (error);
      got = dcp_settings_get (&s, cases[i].key);
      g_assert_cmpstr (got, ==, cases[i].value);
    }
  g_assert_cmpuint (s.kv_bits_k, ==, 6);
  g_assert_cmpuint (s.kv_bits_v, ==, 4);
  g_assert_cmpuint (s.keep_free_bytes, ==, 3 * (G_GUINT64_CONSTANT (1) << 29));

  line = dcp_settings_to_command_line (&s, TRUE);
  g_assert_true (g_shell_parse_argv (line, &argc, &argv, NULL));
  g_assert_cmpstr (argv[0], ==, "decapybara");
  g_assert_cmpint (argc, ==, 1 + 2 * (int) G_N_ELEMENTS (cases));
  dcp_settings_init_default (&back);
  for (int i = 1; i + 1 < argc; i += 2)
    g_assert_true (dcp_settings_set (&back, argv[i] + 2, argv[i + 1], NULL));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *a = dcp_settings_get (&s, cases[i].key);
      g_autofree char *b = dcp_settings_get (&back, cases[i].key);
      g_assert_cmpstr (a, ==, b);
    }
  /* The key stays off the clipboard unless asked for. */
  {
    g_autofree char *safe = dcp_settings_to_command_line (&s, FALSE);
    g_assert_null (strstr (safe, "s3cret"));
  }
}

static void
test_defaults_give_bare_command (void)
{
  g_auto(DcpSettings) s = { 0 };
  g_autofree char *line = NULL;

  dcp_settings_init_default (&s);
  line = dcp_settings_to_command_line (&s, TRUE);
  g_assert_cmpstr (line, ==, "decapybara");
}

static void
test_bad_values (void)
{
  static const struct { const char *key, *value; } cases[] = {
    { "port", "-1" }, { "port", "65536" }, { "port", "80x" }, { "conversations", "0" },
    { "context", "0" }, { "context", "-5" }, { "kv-bits", "5/5" }, { "kv-bits", "16" },
    { "rope-scaling", "2m" }, { "draft-length", "16" }, { "keep-free", "lots" },
    { "keep-free", "-1" }, { "ram-cache", "" }, { "model", "" }, { "backend", "rocm" },
    { "integrity-interval", "-5" }, { "integrity-interval", "604801" },
    { "no-such-key", "1" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(DcpSettings) s = { 0 };
      g_autoptr(GError) error = NULL;

      dcp_settings_init_default (&s);
      g_assert_false (dcp_settings_set (&s, cases[i].key, cases[i].value, &error));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, cases[i].key));
    }
}

static void
test_json_and_environment (void)
{
  g_auto(DcpSettings) s = { 0 };
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) env = NULL;

  dcp_settings_init_default (&s);
  g_assert_true (json_parser_load_from_data (parser,
    "{\"conversations\": 8, \"context\": 32768, \"context-mode\": \"fixed\", \"keep-free\": 2.0}", -1, NULL));
  g_assert_true (dcp_settings_load_json (&s, json_parser_get_root (parser), &error));
  g_assert_no_error (error);
  g_assert_cmpuint (s.conversations, ==, 8);
  g_assert_cmpuint (s.context_tokens, ==, 32768);

  /* The environment overrides the file (the command line, applied last, overrides both). */
  env = g_environ_setenv (NULL, "DECAPYBARA_CONVERSATIONS", "3", TRUE);
  env = g_environ_setenv (env, "DECAPYBARA_API_KEY", "k", TRUE);
  env = g_environ_setenv (env, "DECAPYBARA_KV_BITS", "8/8", TRUE);
  g_assert_true (dcp_settings_load_environ (&s, env, &error));
  g_assert_cmpuint (s.conversations, ==, 3);
  g_assert_cmpstr (s.api_key, ==, "k");
  g_assert_cmpuint (s.kv_bits_v, ==, 8);

  env = g_environ_setenv (env, "DECAPYBARA_PORT", "http", TRUE);
  g_assert_false (dcp_settings_load_environ (&s, env, &error));
  g_assert_nonnull (strstr (error->message, "DECAPYBARA_PORT"));
  g_clear_error (&error);

  g_assert_true (json_parser_load_from_data (parser, "{\"conversations\": [1]}", -1, NULL));
  g_assert_false (dcp_settings_load_json (&s, json_parser_get_root (parser), &error));
  g_assert_nonnull (strstr (error->message, "conversations"));
}

static void
test_validate (void)
{
  DcpEngineCaps cpu_only = { 0 };
  DcpEngineCaps everything = {
    .cuda = TRUE,
    .kv_quantized = TRUE,
    .fp8_activations = TRUE,
    .speculators = TRUE,
    .vision = TRUE,
    .tiers = TRUE,
    .rope_yarn = TRUE,
  };
  g_auto(DcpSettings) s = { 0 };
  g_autoptr(GError) error = NULL;

  dcp_settings_init_default (&s);
  g_assert_false (dcp_settings_validate (&s, &cpu_only, &error));   /* cuda by default */
  g_assert_nonnull (strstr (error->message, "--backend cpu"));
  g_clear_error (&error);
  dcp_settings_set (&s, "backend", "cpu", NULL);
  g_assert_true (dcp_settings_validate (&s, &cpu_only, &error));

  dcp_settings_set (&s, "kv-bits", "6/4", NULL);
  g_assert_false (dcp_settings_validate (&s, &cpu_only, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "not implemented yet"));
  g_clear_error (&error);
  g_assert_true (dcp_settings_validate (&s, &everything, &error));

  /* speculators run on both backends; dflash needs a drafter file, and a backend that runs it */
  dcp_settings_set (&s, "speculator", "ngram", NULL);
  g_assert_true (dcp_settings_validate (&s, &everything, &error));
  g_assert_true (dcp_settings_set (&s, "speculator", "dflash", NULL));
  g_assert_false (dcp_settings_validate (&s, &everything, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "--drafter FILE"));
  g_clear_error (&error);
  g_assert_true (dcp_settings_set (&s, "drafter", "/models/drafter.mcapy", NULL));
  g_assert_false (dcp_settings_validate (&s, &everything, &error));   /* no dflash in these caps */
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "no DFlash drafter"));
  g_clear_error (&error);
  everything.dflash = TRUE;
  g_assert_true (dcp_settings_validate (&s, &everything, &error));
  dcp_settings_set (&s, "speculator", "ngram", NULL);
  g_assert_false (dcp_settings_validate (&s, &everything, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "--drafter is read only with --speculator dflash"));
  g_clear_error (&error);
  g_clear_pointer (&s.drafter, g_free);
  dcp_settings_set (&s, "speculator", "off", NULL);

  dcp_settings_set (&s, "context-mode", "fixed", NULL);
  dcp_settings_set (&s, "disk-cache", "10", NULL);
  g_assert_false (dcp_settings_validate (&s, &everything, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

static void
test_every_setting_is_explained (void)
{
  for (guint i = 0; i < dcp_settings_count (); i++)
    {
      const DcpSettingInfo *info = dcp_settings_info (i);
      g_assert_true (strlen (info->summary) > 10);
      g_assert_true (strlen (info->explanation) > 20);
      g_assert_nonnull (info->arg);
    }
}

/* A copy owns its strings: clearing the original leaves it whole (a shared pointer was freed
 * twice when the engine cleared both). */
static void
test_copy_owns_strings (void)
{
  g_auto(DcpSettings) s = { 0 };
  g_auto(DcpSettings) copy = { 0 };
  const char *keys[] = { "model", "drafter", "host", "api-key", "disk-cache-dir" };

  dcp_settings_init_default (&s);
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    g_assert_true (dcp_settings_set (&s, keys[i], "/tmp/x", NULL));
  dcp_settings_copy (&copy, &s);
  g_assert_true (copy.model != s.model && copy.drafter != s.drafter && copy.host != s.host &&
                 copy.api_key != s.api_key && copy.disk_cache_dir != s.disk_cache_dir);
  dcp_settings_clear (&s);
  g_assert_cmpstr (copy.drafter, ==, "/tmp/x");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/settings/every-key-round-trips", test_every_key_round_trips);
  g_test_add_func ("/settings/defaults-give-bare-command", test_defaults_give_bare_command);
  g_test_add_func ("/settings/bad-values", test_bad_values);
  g_test_add_func ("/settings/json-and-environment", test_json_and_environment);
  g_test_add_func ("/settings/validate", test_validate);
  g_test_add_func ("/settings/copy-owns-strings", test_copy_owns_strings);
  g_test_add_func ("/settings/every-setting-is-explained", test_every_setting_is_explained);
  return g_test_run ();
}
