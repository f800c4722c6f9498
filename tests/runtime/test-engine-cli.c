/* SPDX-License-Identifier: MIT */
/* The engine's command line (DECAPYBARA_ENGINE): settings.json < DECAPYBARA_* < options (the
 * model path an error names shows which won), --help lists every setting of the table, what the
 * CPU backend cannot do is refused with "not implemented yet", D-Bus options; rope scaling
 * starts the CPU backend with YaRN (1m, or auto and a context past the native one); --speculator
 * dflash with and without a fitting --drafter (one with no room for it refused by the memory
 * plan), and a fitting one serving a completion with drafts. */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "dcp-converter.h"
#include "dcp-settings.h"

typedef struct {
  int status;
  char *out;
  char *err;
} Result;

static void
result_clear (Result *r)
{
  g_free (r->out);
  g_free (r->err);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Result, result_clear)

/* Runs the engine with argv (NULL-terminated, without the program) and extra environment
 * (KEY=VALUE strings, NULL-terminated, may be NULL); XDG_CONFIG_HOME points at config_home. */
static void
run_engine (Result *r, const char *config_home, const char * const *env, const char * const *args)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                                                                       G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;

  g_subprocess_launcher_unsetenv (launcher, "DECAPYBARA_MODEL");
  g_subprocess_launcher_unsetenv (launcher, "DECAPYBARA_BACKEND");
  g_subprocess_launcher_setenv (launcher, "XDG_CONFIG_HOME", config_home, TRUE);
  for (guint i = 0; env != NULL && env[i] != NULL; i++)
    {
      g_auto(GStrv) kv = g_strsplit (env[i], "=", 2);

      g_subprocess_launcher_setenv (launcher, kv[0], kv[1], TRUE);
    }
  g_ptr_array_add (argv, (gpointer) g_getenv ("DECAPYBARA_ENGINE"));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  proc = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (proc, NULL, NULL, &r->out, &r->err, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (proc));
  r->status = g_subprocess_get_exit_status (proc);
}

static void
test_precedence (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *home = g_dir_make_tmp ("dcp-cli-XXXXXX", &error);
  g_autofree char *dir = g_build_filename (home, "decapybara", NULL);
  g_autofree char *file = g_build_filename (dir, "settings.json", NULL);
  g_autofree char *other = g_build_filename (home, "other.json", NULL);
  const char *env[] = { "DECAPYBARA_MODEL=/nonexistent/from-env.mcapy", NULL };
  const char *cpu[] = { "--backend", "cpu", NULL };
  const char *cpu_model[] = { "--backend", "cpu", "--model", "/nonexistent/from-option.mcapy", NULL };
  const char *two[] = { "--backend", "cpu", "--model", "/nonexistent/first.mcapy",
                        "--model", "/nonexistent/second.mcapy", NULL };
  const char *with_file[] = { "--backend", "cpu", "--settings", other, NULL };

  g_assert_no_error (error);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_file_set_contents (file, "{\"model\": \"/nonexistent/from-file.mcapy\"}", -1, &error);
  g_assert_no_error (error);
  g_file_set_contents (other, "{\"model\": \"/nonexistent/from-other.mcapy\"}", -1, &error);
  g_assert_no_error (error);

  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, cpu);
    /* Settings that cannot work end with status 2: the systemd unit does not restart on it. */
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "from-file.mcapy: no such file"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, env, cpu);
    g_assert_nonnull (strstr (r.err, "from-env.mcapy: no such file"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, env, cpu_model);
    g_assert_nonnull (strstr (r.err, "from-option.mcapy: no such file"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, two);
    g_assert_nonnull (strstr (r.err, "second.mcapy: no such file"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, with_file);
    g_assert_nonnull (strstr (r.err, "from-other.mcapy: no such file"));
  }
  g_unlink (file);
  g_unlink (other);
  g_rmdir (dir);
  g_rmdir (home);
}

static void
test_help_and_refusals (void)
{
  const char *help[] = { "--help", NULL };
  const char *fp8[] = { "--backend", "cpu", "--activations", "fp8", NULL };
  /* The default backend is cuda: without a GPU (or CUDA in the build) it says to use the CPU. */
  const char *cuda[] = { "--model", g_getenv ("DECAPYBARA_TINY_MODEL"), "--no-dbus", "--no-dashboard", NULL };
  const char *bad[] = { "--kv-bits", "7/7", NULL };
  g_autofree char *home = g_dir_make_tmp ("dcp-cli-XXXXXX", NULL);

  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, help);
    g_assert_cmpint (r.status, ==, 0);
    for (guint i = 0; i < dcp_settings_count (); i++)
      {
        const DcpSettingInfo *info = dcp_settings_info (i);
        g_autofree char *option = g_strdup_printf ("--%s=", info->key);

        g_assert_nonnull (strstr (r.out, option));
        g_assert_nonnull (strstr (r.out, info->summary));
      }
    g_assert_nonnull (strstr (r.out, "--settings"));
    g_assert_nonnull (strstr (r.out, "--no-dbus"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, fp8);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "--activations fp8 is not implemented yet"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, cuda);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "--backend cpu"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, bad);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "kv-bits"));
  }
  g_rmdir (home);
}

typedef void (*ServeFunc) (SoupSession *session, const char *url);

/* Starts the engine on the tiny model (native context 32,768) on the CPU backend with args, waits
 * until it listens, has serve (optional) send it requests, stops it, and returns what it
 * logged. */
static char *
serve_listening (const char *const *args, ServeFunc serve)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *log_path = NULL;
  char *log = NULL;
  int fd = g_file_open_tmp ("decapybara-rope-XXXXXX.log", &log_path, &error);

  g_assert_no_error (error);
  close (fd);
  g_subprocess_launcher_set_stderr_file_path (launcher, log_path);
  g_subprocess_launcher_unsetenv (launcher, "DECAPYBARA_API_KEY");
  g_ptr_array_add (argv, (gpointer) g_getenv ("DECAPYBARA_ENGINE"));
  for (const char *const *a = (const char *const[]) { "--backend", "cpu", "--model", g_getenv ("DECAPYBARA_TINY_MODEL"),
                                                      "--port", "0", "--no-dbus", "--no-dashboard", NULL };
       *a != NULL; a++)
    g_ptr_array_add (argv, (gpointer) *a);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  proc = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  for (int tries = 0; tries < 1200; tries++)
    {
      g_clear_pointer (&log, g_free);
      g_usleep (25000);
      if (g_file_get_contents (log_path, &log, NULL, NULL) && strstr (log, "listening on") != NULL)
        break;
    }
  g_assert_nonnull (strstr (log, "listening on"));
  if (serve != NULL)
    {
      g_autoptr(GRegex) regex = g_regex_new ("listening on (http://[^/\\s]+)", 0, 0, NULL);
      g_autoptr(GMatchInfo) match = NULL;
      g_autoptr(SoupSession) session = soup_session_new_with_options ("timeout", 60, NULL);
      g_autofree char *url = NULL;

      g_assert_true (g_regex_match (regex, log, 0, &match));
      url = g_match_info_fetch (match, 1);
      serve (session, url);
    }
  g_subprocess_send_signal (proc, SIGTERM);
  g_subprocess_wait (proc, NULL, &error);
  g_assert_no_error (error);
  g_unlink (log_path);
  return log;
}

static char *
run_listening (const char *const *args)
{
  return serve_listening (args, NULL);
}

static void
test_rope_scaling (void)
{
  g_autofree char *home = g_dir_make_tmp ("dcp-cli-XXXXXX", NULL);
  const char *off_long[] = { "--backend", "cpu", "--model", g_getenv ("DECAPYBARA_TINY_MODEL"),
                             "--rope-scaling", "off", "--context", "40000", NULL };

  {
    g_autofree char *log = run_listening ((const char *const[]) { "--rope-scaling", "1m", NULL });

    g_assert_nonnull (strstr (log, "RoPE: YaRN, positions up to 131072"));
  }
  {
    g_autofree char *log = run_listening ((const char *const[]) { "--context", "40000", NULL });

    g_assert_nonnull (strstr (log, "RoPE: YaRN, positions up to 131072"));
    g_assert_nonnull (strstr (log, "context size to 40448"));
  }
  {
    g_autofree char *log = run_listening ((const char *const[]) { "--context", "32768", NULL });

    g_assert_null (strstr (log, "YaRN"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, off_long);
    g_assert_cmpint (r.status, ==, 2);   /* settings that cannot work: restarting cannot help */
    g_assert_nonnull (strstr (r.err, "past the model's 32768 (--rope-scaling auto or 1m stretches it to 131072"));
  }
  g_rmdir (home);
}

/* The presets' speculator (the MTP head, lengths chosen by confidence) starts: no fallback. */
static void
test_speculator (void)
{
  g_autofree char *log =
      run_listening ((const char *const[]){ "--speculator", "mtp", "--draft-length", "0", NULL });

  g_assert_null (strstr (log, "speculation is off"));
  g_assert_null (strstr (log, "WARNING"));
}

/* A DFlash drafter checkpoint for the tiny model (hidden 64, vocabulary 151,936, 4 layers): one
 * layer, zero weights in F32 (they only have to fit), converted into dir; returns the file. */
static char *
tiny_drafter (const char *dir)
{
  static const struct { const char *name; guint64 rows, cols; } tensors[] = {
    { "fc.weight", 64, 64 }, { "hidden_norm.weight", 64, 0 }, { "norm.weight", 64, 0 },
    { "layers.0.input_layernorm.weight", 64, 0 }, { "layers.0.post_attention_layernorm.weight", 64, 0 },
    { "layers.0.self_attn.q_proj.weight", 64, 64 }, { "layers.0.self_attn.k_proj.weight", 32, 64 },
    { "layers.0.self_attn.v_proj.weight", 32, 64 }, { "layers.0.self_attn.o_proj.weight", 64, 64 },
    { "layers.0.self_attn.q_norm.weight", 32, 0 }, { "layers.0.self_attn.k_norm.weight", 32, 0 },
    { "layers.0.mlp.gate_proj.weight", 96, 64 }, { "layers.0.mlp.up_proj.weight", 96, 64 },
    { "layers.0.mlp.down_proj.weight", 64, 96 },
  };
  const char *config =
    "{\"architectures\": [\"DFlashDraftModel\"], \"hidden_size\": 64, \"num_hidden_layers\": 1,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 32, \"intermediate_size\": 96,"
    " \"vocab_size\": 151936, \"num_target_layers\": 4, \"block_size\": 16,"
    " \"dflash_config\": {\"mask_token_id\": 151935}}";
  g_autoptr(GString) header = g_string_new ("{");
  g_autoptr(GByteArray) file = g_byte_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *st_path = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *out = g_build_filename (dir, "tiny-dflash.mcapy", NULL);
  DcpConvertOptions options = { .input_dir = dir, .output_path = out, .recipe = DCP_RECIPE_BF16, .n_threads = 1 };
  guint64 at = 0, len, total;

  for (guint i = 0; i < G_N_ELEMENTS (tensors); i++)
    {
      guint64 n = 4 * tensors[i].rows * MAX (tensors[i].cols, 1);
      g_autofree char *shape = tensors[i].cols ? g_strdup_printf ("%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT, tensors[i].rows, tensors[i].cols)
                                               : g_strdup_printf ("%" G_GUINT64_FORMAT, tensors[i].rows);
      g_string_append_printf (header, "%s\"%s\": {\"dtype\": \"F32\", \"shape\": [%s], \"data_offsets\": [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]}",
                              i ? ", " : "", tensors[i].name, shape, at, at + n);
      at += n;
    }
  g_string_append (header, "}");
  total = at;
  len = GUINT64_TO_LE (header->len);
  g_byte_array_append (file, (const guint8 *) &len, 8);
  g_byte_array_append (file, (const guint8 *) header->str, header->len);
  g_byte_array_set_size (file, file->len + total);
  memset (file->data + 8 + header->len, 0, total);
  g_file_set_contents (st_path, (const char *) file->data, file->len, &error);
  g_assert_no_error (error);
  g_file_set_contents (config_path, config, -1, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  g_unlink (st_path);
  g_unlink (config_path);
  return g_steal_pointer (&out);
}

/* A request to url + path (body: POST it); the JSON reply, which must come with status 200. */
static JsonNode *
request_json (SoupSession *session, const char *url, const char *path, const char *body)
{
  g_autofree char *uri = g_strconcat (url, path, NULL);
  g_autoptr(SoupMessage) msg = soup_message_new (body != NULL ? "POST" : "GET", uri);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GBytes) reply = NULL;
  g_autoptr(GError) error = NULL;

  if (body != NULL)
    {
      g_autoptr(GBytes) bytes = g_bytes_new (body, strlen (body));

      soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
    }
  reply = soup_session_send_and_read (session, msg, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (soup_message_get_status (msg), ==, 200);
  json_parser_load_from_data (parser, g_bytes_get_data (reply, NULL), g_bytes_get_size (reply),
                              &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

/* A completion is served, and /stats shows its drafts verified. */
static void
serve_with_drafts (SoupSession *session, const char *url)
{
  g_autoptr(JsonNode) done = request_json (session, url, "/v1/completions",
                                            "{\"prompt\": \"one two three one two three one two\", "
                                            "\"max_tokens\": 8, \"temperature\": 0}");
  g_autoptr(JsonNode) stats = request_json (session, url, "/stats", NULL);
  JsonObject *usage = json_object_get_object_member (json_node_get_object (done), "usage");
  JsonObject *sched = json_object_get_object_member (json_node_get_object (stats), "scheduler");

  g_assert_cmpint (json_object_get_int_member (usage, "completion_tokens"), ==, 8);
  g_assert_cmpint (json_object_get_int_member (sched, "verify_steps"), >, 0);
  g_assert_cmpint (json_object_get_int_member (sched, "drafted_tokens"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (sched, "mean_accepted_length"), >=, 1);
}

/* --speculator dflash: it needs --drafter; a drafter of another model is refused naming the
 * field; a fitting one is checked and logged at start, and drafts while serving. */
static void
test_dflash (void)
{
  g_autofree char *home = g_dir_make_tmp ("dcp-cli-XXXXXX", NULL);
  g_autofree char *dir = g_dir_make_tmp ("dcp-cli-drafter-XXXXXX", NULL);
  g_autofree char *odd_dir = g_test_build_filename (G_TEST_DIST, "data", "models", "dflash-odd", NULL);
  g_autofree char *odd = g_build_filename (dir, "odd-dflash.mcapy", NULL);
  g_autofree char *fits = tiny_drafter (dir);
  g_autoptr(GError) error = NULL;
  DcpConvertOptions options = { .input_dir = odd_dir, .output_path = odd, .recipe = DCP_RECIPE_BF16, .n_threads = 1 };
  const char *no_drafter[] = { "--backend", "cpu", "--model", g_getenv ("DECAPYBARA_TINY_MODEL"),
                               "--speculator", "dflash", "--no-dbus", "--no-dashboard", NULL };
  const char *other[] = { "--backend", "cpu", "--model", g_getenv ("DECAPYBARA_TINY_MODEL"), "--port", "0",
                          "--speculator", "dflash", "--drafter", odd, "--no-dbus", "--no-dashboard", NULL };
  const char *model_as_drafter[] = { "--backend", "cpu", "--model", g_getenv ("DECAPYBARA_TINY_MODEL"), "--port", "0",
                                     "--speculator", "dflash", "--drafter", g_getenv ("DECAPYBARA_TINY_MODEL"),
                                     "--no-dbus", "--no-dashboard", NULL };

  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, no_drafter);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "--speculator dflash needs --drafter FILE"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, other);
    g_assert_cmpint (r.status, !=, 0);
    g_assert_nonnull (strstr (r.err, "drafter field “target.hidden_size” is 96, the model's is 64"));
  }
  {
    g_auto(Result) r = { 0 };

    run_engine (&r, home, NULL, model_as_drafter);
    g_assert_cmpint (r.status, !=, 0);
    g_assert_nonnull (strstr (r.err, "not a drafter file"));
  }
  {
    g_auto(Result) r = { 0 };
    const char *drafter_as_model[] = { "--backend", "cpu", "--model", fits, "--no-dbus", "--no-dashboard", NULL };

    run_engine (&r, home, NULL, drafter_as_model);
    g_assert_cmpint (r.status, !=, 0);
    g_assert_nonnull (strstr (r.err, "a DFlash drafter file (metadata field “drafter”), not a model: give it with --drafter"));
  }
  {
    g_auto(Result) r = { 0 };
    const char *no_room[] = { "--backend", "cpu", "--model", g_getenv ("DECAPYBARA_TINY_MODEL"), "--port", "0",
                              "--speculator", "dflash", "--drafter", fits, "--keep-free", "100000",
                              "--no-dbus", "--no-dashboard", NULL };

    /* the plan counts the drafter: no room for it is refused at start, naming the numbers */
    run_engine (&r, home, NULL, no_room);
    g_assert_cmpint (r.status, !=, 0);
    g_assert_nonnull (strstr (r.err, "the model and the DFlash drafter do not fit"));
    g_assert_nonnull (strstr (r.err, "and 256 bytes per token of context beside the model's"));
  }
  {
    g_autofree char *log =
        serve_listening ((const char *const[]){ "--speculator", "dflash", "--drafter", fits,
                                                "--draft-length", "4", NULL },
                         serve_with_drafts);

    g_assert_nonnull (strstr (log, "DFlash, 1 layers, block 16, taps after layers [2]"));
    /* its weights in the plan's table, its context (FP32 K and V of one layer of one 32-value
     * head) beside the model's KV */
    g_assert_nonnull (strstr (log, "  DFlash drafter "));
    g_assert_nonnull (strstr (log, " bytes per token and the drafter's 256; pool of "));
    g_assert_null (strstr (log, "speculation is off"));
  }
  g_unlink (odd);
  g_unlink (fits);
  g_rmdir (dir);
  g_rmdir (home);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/engine-cli/precedence", test_precedence);
  g_test_add_func ("/engine-cli/help-and-refusals", test_help_and_refusals);
  g_test_add_func ("/engine-cli/rope-scaling", test_rope_scaling);
  g_test_add_func ("/engine-cli/speculator", test_speculator);
  g_test_add_func ("/engine-cli/dflash", test_dflash);
  return g_test_run ();
}
