/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-window-private.h"
#include "launcher-test-util.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

/* The window, built headless against a fake engine that reports a GPU, with a model head in a
 * temporary models folder. */

typedef struct {
  char *dir;
  char *engine;
  GSettings *gsettings;
  DcpWindow *window;
  TestHead head;
  guint64 free_bytes;
} Fixture;

static void
iterate_until (gboolean (*done) (Fixture *f), Fixture *f)
{
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (!done (f))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

static gboolean
have_device (Fixture *f)
{
  return f->window->have_device;
}

static gboolean
have_meta (Fixture *f)
{
  return f->window->meta != NULL;
}

/* data: NULL, or "no-gpu": a probe without a GPU, an empty models folder and no model chosen. */
static void
setup (Fixture *f, gconstpointer data)
{
  gboolean no_gpu = g_strcmp0 (data, "no-gpu") == 0;
  g_autoptr(GRand) rand = g_rand_new_with_seed (31);
  g_autofree char *script = NULL;
  g_autofree char *model = NULL;

  f->dir = g_dir_make_tmp ("dcp-window-XXXXXX", NULL);
  f->free_bytes = (guint64) g_rand_int_range (rand, 60, 140) * GIB;
  script = g_strdup_printf ("#!/bin/sh\n"
                            "if [ \"$1\" = --probe ]; then\n"
                            "%s"
                            "echo '{\"available\": true, \"name\": \"Fake H200\", \"total_bytes\": %" G_GUINT64_FORMAT ","
                            " \"free_bytes\": %" G_GUINT64_FORMAT ", \"peak_bandwidth_gbps\": 4800,"
                            " \"measured_bandwidth_gbps\": 4100.5}'\n"
                            "exit 0\nfi\n"
                            "echo \"args: $*\"; echo \"key: $DECAPYBARA_API_KEY\"\n"
                            "[ \"$1\" = --settings ] && echo \"settings: $(cat \"$2\")\"\n"
                            "echo 'fake-engine: cannot allocate the KV pool' >&2\nexit 4\n",
                            no_gpu ? "echo '{\"available\": false, \"reason\": \"no NVIDIA driver\"}'; exit 0\n" : "",
                            f->free_bytes + 2 * GIB, f->free_bytes);
  f->engine = g_build_filename (f->dir, "fake-engine", NULL);
  g_assert_true (g_file_set_contents (f->engine, script, -1, NULL));
  g_assert_cmpint (g_chmod (f->engine, 0755), ==, 0);
  test_head_random (&f->head, rand);
  model = test_head_write (f->dir, "qwen-test.mcapy", &f->head);

  f->gsettings = g_settings_new (APP_ID);
  /* The memory backend lives as long as the process: each test starts from the defaults. */
  {
    g_autoptr(GSettingsSchema) schema = NULL;
    g_auto(GStrv) keys = NULL;

    g_object_get (f->gsettings, "settings-schema", &schema, NULL);
    keys = g_settings_schema_list_keys (schema);
    for (guint i = 0; keys[i] != NULL; i++)
      g_settings_reset (f->gsettings, keys[i]);
  }
  if (no_gpu)
    {
      g_autofree char *folder = g_build_filename (f->dir, "models", NULL);

      g_assert_cmpint (g_mkdir (folder, 0755), ==, 0);
      g_settings_set_string (f->gsettings, "models-folder", folder);
    }
  else
    {
      g_settings_set_string (f->gsettings, "models-folder", f->dir);
      g_settings_set_string (f->gsettings, "model", "qwen-test.mcapy");
    }
  f->window = g_object_ref_sink (dcp_window_new (NULL, f->gsettings, f->engine));
  gtk_window_present (GTK_WINDOW (f->window));
  iterate_until (have_device, f);
  iterate_until (have_meta, f);
}

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) d = g_dir_open (path, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      remove_tree (child);
    }
  g_remove (path);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autoptr(GDir) d = g_dir_open (f->dir, 0, NULL);
  const char *name;

  gtk_window_destroy (GTK_WINDOW (f->window));
  g_clear_object (&f->window);
  g_clear_object (&f->gsettings);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (f->dir, name, NULL);
      remove_tree (path);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_free (f->engine);
}

static void
clipboard_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  char **text = user_data;

  *text = gdk_clipboard_read_text_finish (GDK_CLIPBOARD (source), result, NULL);
  g_assert_nonnull (*text);
}

static char *
copy_text (Fixture *f)
{
  GdkClipboard *clipboard = gtk_widget_get_clipboard (GTK_WIDGET (f->window));
  char *text = NULL;

  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.copy-command", NULL));
  gdk_clipboard_read_text_async (clipboard, NULL, clipboard_read, &text);
  while (text == NULL)
    g_main_context_iteration (NULL, TRUE);
  return text;
}

static void
test_presets (Fixture *f, gconstpointer data)
{
  g_autofree char *model = g_build_filename (f->dir, "qwen-test.mcapy", NULL);

  g_assert_cmpstr (f->window->settings.model, ==, model);
  /* A key set in the lock's popover: kept out of Copy. */
  gtk_editable_set_text (GTK_EDITABLE (f->window->key_entry), "sk-test-secret");
  g_assert_cmpstr (f->window->settings.api_key, ==, "sk-test-secret");

  for (guint i = 0; dcp_preset_builtin_ids[i] != NULL; i++)
    {
      const char *id = dcp_preset_builtin_ids[i];
      g_autoptr(DcpPreset) preset = dcp_preset_load (dcp_presets_dir (), id, NULL);
      g_auto(DcpSettings) expected = { 0 };
      g_autofree char *want = NULL, *copied = NULL;

      g_test_message ("preset %s", id);
      /* Through the drop-down, as a click would. */
      adw_combo_row_set_selected (f->window->preset_row, i);
      g_assert_true (dcp_preset_matches (preset, &f->window->settings));
      g_assert_cmpstr (dcp_window_get_preset_id (f->window), ==, id);

      dcp_settings_init_default (&expected);
      g_assert_true (dcp_preset_apply (preset, &expected, NULL));
      g_assert_true (dcp_settings_set (&expected, "model", model, NULL));
      want = dcp_settings_to_command_line (&expected, FALSE);
      copied = copy_text (f);
      g_assert_cmpstr (copied, ==, want);
      g_assert_null (strstr (copied, "sk-test-secret"));
      g_assert_cmpstr (adw_action_row_get_subtitle (f->window->command_row), ==, want);
      /* The preset's controls show its values. */
      for (guint k = 0; preset->keys[k] != NULL; k++)
        g_assert_true (dcp_settings_page_has_row (f->window->settings_page, preset->keys[k]) ||
                       g_str_equal (preset->keys[k], "api-key"));
    }

  /* Changing one value makes it Custom; the last used settings are saved without the key. */
  g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "conversations", "3"));
  g_assert_cmpuint (f->window->settings.conversations, ==, 3);
  g_assert_cmpstr (dcp_window_get_preset_id (f->window), ==, "custom");
  g_assert_cmpuint (adw_combo_row_get_selected (f->window->preset_row), ==, f->window->presets->len);
  {
    g_autofree char *saved = g_settings_get_string (f->gsettings, "last-settings");
    g_assert_nonnull (strstr (saved, "\"conversations\":\"3\""));
    g_assert_null (strstr (saved, "sk-test-secret"));
  }
}

/* The plan for the window's settings, model and the fake GPU, as the planner makes it. */
static void
window_plan (Fixture *f, DcpMemoryPlan *plan)
{
  DcpPlanSettings ps;
  DcpPlanDevice pd = { f->free_bytes + 2 * GIB, f->free_bytes };
  g_autoptr(GError) error = NULL;

  dcp_settings_to_plan (&f->window->settings, &ps);
  g_assert_true (dcp_memory_plan_compute (plan, &f->window->meta->plan, &ps, &pd, &error));
  g_assert_no_error (error);
}

static void
check_costs (Fixture *f)
{
  DcpMemoryPlan plan;
  g_autofree char *vram = NULL, *client = NULL, *context = NULL, *disk = NULL;

  window_plan (f, &plan);
  vram = g_strdup_printf ("%.2f GiB of %.2f GiB", plan.vram_total / (double) GIB, plan.vram_budget / (double) GIB);
  client = g_strdup_printf ("Set your client's context size to %" G_GUINT64_FORMAT, plan.context_per_conversation);
  context = g_strdup_printf ("%" G_GUINT64_FORMAT " tokens per conversation (pool of %" G_GUINT64_FORMAT " tokens",
                             plan.context_per_conversation, plan.pool_tokens);
  disk = g_strdup_printf ("%.2f GiB", plan.disk / (double) GIB);
  g_test_message ("%s | %s", dcp_costs_view_get_text (f->window->costs_view, "vram"), vram);
  g_assert_true (g_str_has_prefix (dcp_costs_view_get_text (f->window->costs_view, "vram"), vram));
  g_assert_true (g_str_has_suffix (dcp_costs_view_get_text (f->window->costs_view, "vram"),
                                   plan.fits ? "fits" : plan.vram_total > plan.vram_budget ? "too much" : "context"));
  g_assert_cmpstr (dcp_costs_view_get_text (f->window->costs_view, "client"), ==, client);
  g_assert_true (g_str_has_prefix (dcp_costs_view_get_text (f->window->costs_view, "context"), context));
  g_assert_true (g_str_has_prefix (dcp_costs_view_get_text (f->window->costs_view, "disk"), disk));
}

static void
test_costs (Fixture *f, gconstpointer data)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (32);
  const char *const *kv = dcp_settings_page_choices ("kv-bits");

  g_assert_cmpstr (dcp_costs_view_get_text (f->window->costs_view, "gpu"), ==, "Fake H200");
  g_assert_nonnull (strstr (dcp_costs_view_get_text (f->window->costs_view, "bandwidth"), "4100"));
  check_costs (f);
  for (guint round = 0; round < 12; round++)
    {
      g_autofree char *conv = g_strdup_printf ("%d", g_rand_int_range (rand, 1, 33));
      const char *kv_value = kv[g_rand_int_range (rand, 0, g_strv_length ((char **) kv))];

      g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "conversations", conv));
      g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "kv-bits", kv_value));
      g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "context-mode", round % 2 ? "fixed" : "pool"));
      g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "speculator", round % 3 ? "mtp" : "off"));
      g_assert_cmpuint (f->window->settings.conversations, ==, atoi (conv));
      check_costs (f);
      /* Accuracy: the file's KV entry when measured (4/4 in the test head), else the weights'. */
      g_assert_nonnull (strstr (dcp_costs_view_get_text (f->window->costs_view, "accuracy"),
                                g_str_equal (kv_value, "4/4") ? "0.0375" : "0.0125"));
      g_assert_nonnull (strstr (dcp_costs_view_get_text (f->window->costs_view, "accuracy"),
                                g_str_equal (kv_value, "4/4") ? "perplexity 6.75 (BF16 6.25)" : "perplexity 6.50 (BF16 6.25)"));
      g_assert_nonnull (strstr (dcp_costs_view_get_text (f->window->costs_view, "speed"), "tokens/s"));
    }
  /* A context past the model's maximum: the planner's error is shown, not a crash. */
  g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "rope-scaling", "off"));
  g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "context", "524288"));
  g_assert_nonnull (strstr (dcp_costs_view_get_text (f->window->costs_view, "vram"), "1m"));
}

static void
test_every_setting_has_a_control (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < dcp_settings_count (); i++)
    {
      const char *key = dcp_settings_info (i)->key;
      const char *const *choices = dcp_settings_page_choices (key);

      if (dcp_preset_key_is_personal (key))
        continue;
      g_assert_true (dcp_settings_page_has_row (f->window->settings_page, key));
      /* Every choice offered is one the engine accepts. */
      for (guint c = 0; choices && choices[c]; c++)
        {
          g_auto(DcpSettings) s = { 0 };
          dcp_settings_init_default (&s);
          g_assert_true (dcp_settings_set (&s, key, choices[c], NULL));
        }
    }
}

/* ---- the repository: listed, its head fetched by Range, downloaded with a SHA-256 check ---- */

typedef struct {
  GBytes *file;
  char *tree;
  guint ranged_gets;
} Repo;

static void
serve_repo (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  Repo *r = user_data;
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *resp = soup_server_message_get_response_headers (msg);
  SoupRange *ranges = NULL;
  int n = 0;
  gsize len;
  const char *data = g_bytes_get_data (r->file, &len);

  if (g_str_equal (path, "/api/models/org/models/tree/main"))
    {
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, r->tree, strlen (r->tree));
      return;
    }
  if (!g_str_equal (path, "/org/models/resolve/main/remote.mcapy"))
    {
      soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
      return;
    }
  soup_message_headers_replace (resp, "Accept-Ranges", "bytes");
  if (soup_message_headers_get_ranges (req, len, &ranges, &n))
    {
      goffset end = MIN (ranges[0].end, (goffset) len - 1);

      r->ranged_gets++;
      soup_server_message_set_status (msg, SOUP_STATUS_PARTIAL_CONTENT, NULL);
      soup_message_headers_set_content_range (resp, ranges[0].start, end, len);
      soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY,
                                        data + ranges[0].start, end - ranges[0].start + 1);
      soup_message_headers_free_ranges (req, ranges);
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY, data, len);
}

static gboolean
have_remote_meta (Fixture *f)
{
  return f->window->meta != NULL && g_str_equal (f->window->meta->name, "remote.mcapy");
}

static gboolean
listed_remote (Fixture *f)
{
  const DcpModelEntry *e;

  dcp_model_list_select (f->window->model_list, "remote.mcapy");
  e = dcp_model_list_get_selected (f->window->model_list);
  return e != NULL && g_str_equal (e->name, "remote.mcapy");
}

static gboolean
downloaded (Fixture *f)
{
  const DcpModelEntry *e = dcp_model_list_get_selected (f->window->model_list);
  return e != NULL && e->local_path != NULL && g_str_equal (e->name, "remote.mcapy");
}

static void
test_repository (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupServer) server = soup_server_new (NULL, NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (33);
  g_autoptr(GError) error = NULL;
  g_autofree char *endpoint = NULL, *sha = NULL, *local = NULL, *got = NULL;
  g_autofree char *local_path = g_build_filename (f->dir, "remote.mcapy", NULL);
  gsize got_len = 0;
  GSList *uris;
  TestHead h;
  Repo r = { 0 };

  test_head_random (&h, rand);
  h.padding = 300 << 10;    /* a head past the first Range request */
  r.file = test_head_build (&h);
  sha = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, r.file);
  r.tree = g_strdup_printf ("[{\"type\":\"file\",\"path\":\"remote.mcapy\",\"size\":134,"
                            "\"lfs\":{\"oid\":\"%s\",\"size\":%" G_GSIZE_FORMAT "}}]", sha, g_bytes_get_size (r.file));
  soup_server_add_handler (server, NULL, serve_repo, &r, NULL);
  g_assert_true (soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
  uris = soup_server_get_uris (server);
  endpoint = g_strdup_printf ("http://127.0.0.1:%d", g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  g_setenv ("HF_ENDPOINT", endpoint, TRUE);

  /* Set the repository as the entry row's apply button does. */
  gtk_editable_set_text (GTK_EDITABLE (f->window->repo_row), "org/models");
  g_signal_emit_by_name (f->window->repo_row, "apply");
  iterate_until (listed_remote, f);
  g_assert_null (dcp_model_list_get_selected (f->window->model_list)->local_path);
  /* Costs before downloading: the head came by Range requests only. */
  iterate_until (have_remote_meta, f);
  g_assert_cmpuint (r.ranged_gets, ==, 2);
  g_assert_cmpuint (f->window->meta->plan.text_weight_bytes, ==, h.text);
  check_costs (f);

  g_assert_true (dcp_model_list_download (f->window->model_list, "remote.mcapy"));
  iterate_until (downloaded, f);
  g_assert_true (g_file_get_contents (local_path, &got, &got_len, NULL));
  g_assert_cmpmem (got, got_len, g_bytes_get_data (r.file, NULL), g_bytes_get_size (r.file));
  g_unsetenv ("HF_ENDPOINT");
  g_bytes_unref (r.file);
  g_free (r.tree);
}

/* ---- drafters: a repository with a model, a drafter that fits it and one that does not ---- */

static gboolean engine_ended (Fixture *f);
static gboolean entry_listed (DcpWindow *window, const char *name);

static gboolean
checkpoint_paired (Fixture *f)
{
  const DcpModelEntry *e = dcp_model_list_get_selected (f->window->drafter_list);

  return e != NULL && e->local_path != NULL && g_str_equal (e->name, "Qwen3.5-27B-DFlash.mcapy");
}

/* The z-lab checkpoint folder the launcher also lists (dcp_window_drafter_repositories). */
#define ZLAB "/z-lab/Qwen3.5-27B-DFlash"
static const char zlab_config[] =
    "{\"architectures\": [\"DFlashDraftModel\"], \"block_size\": 16, \"hidden_size\": 5120,"
    " \"vocab_size\": 248320, \"num_hidden_layers\": 5, \"num_key_value_heads\": 8,"
    " \"head_dim\": 128, \"dflash_config\": {\"mask_token_id\": 248070,"
    " \"target_layer_ids\": [1, 16, 31, 46, 61]}}";

typedef struct {
  GHashTable *files; /* path -> GBytes */
  GHashTable *trees; /* path -> the API's file list */
} DrafterRepo;

static void
serve_drafter_repo (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                    gpointer user_data)
{
  DrafterRepo *r = user_data;
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *resp = soup_server_message_get_response_headers (msg);
  GBytes *file = g_hash_table_lookup (r->files, path);
  const char *tree = g_hash_table_lookup (r->trees, path);
  SoupRange *ranges = NULL;
  int n = 0;
  gsize len;
  const char *data;

  if (tree != NULL)
    {
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, tree,
                                        strlen (tree));
      return;
    }
  if (file == NULL)
    {
      soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
      return;
    }
  data = g_bytes_get_data (file, &len);
  soup_message_headers_replace (resp, "Accept-Ranges", "bytes");
  if (soup_message_headers_get_ranges (req, len, &ranges, &n))
    {
      goffset end = MIN (ranges[0].end, (goffset) len - 1);

      soup_server_message_set_status (msg, SOUP_STATUS_PARTIAL_CONTENT, NULL);
      soup_message_headers_set_content_range (resp, ranges[0].start, end, len);
      soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY,
                                        data + ranges[0].start, end - ranges[0].start + 1);
      soup_message_headers_free_ranges (req, ranges);
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY, data, len);
}

/* Adds files to the server and returns the API's list of them. */
static char *
add_files (DrafterRepo *r, const char *repo, const char *const *names, GBytes **contents, guint n)
{
  GString *tree = g_string_new ("[");

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *sha = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, contents[i]);

      g_string_append_printf (tree,
                              "%s{\"type\":\"file\",\"path\":\"%s\",\"size\":134,"
                              "\"lfs\":{\"oid\":\"%s\",\"size\":%" G_GSIZE_FORMAT "}}",
                              i ? "," : "", names[i], sha, g_bytes_get_size (contents[i]));
      g_hash_table_insert (r->files, g_strdup_printf ("%s/resolve/main/%s", repo, names[i]),
                           contents[i]);
    }
  g_string_append (tree, "]");
  return g_string_free (tree, FALSE);
}

static gboolean
drafters_listed (Fixture *f)
{
  GPtrArray *entries = dcp_model_list_get_entries (f->window->drafter_list);

  return entries != NULL && entries->len > 0 && entry_listed (f->window, "remote-model.mcapy");
}

static gboolean
drafter_downloaded (Fixture *f)
{
  const DcpModelEntry *e = dcp_model_list_get_selected (f->window->drafter_list);

  return e != NULL && e->local_path != NULL;
}

static void
test_drafter_pairing (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupServer) server = soup_server_new (NULL, NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (35);
  g_autoptr(GError) error = NULL;
  g_autofree char *endpoint = NULL, *local_other = NULL, *log = NULL, *want = NULL;
  g_autofree char *drafter_path = g_build_filename (f->dir, "drafter-fits.mcapy", NULL);
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (f->window->log_view);
  GtkTextIter start, end;
  const char *names[] = { "remote-model.mcapy", "drafter-fits.mcapy", "drafter-other.mcapy" };
  const char *speculation, *presets, *note;
  GPtrArray *drafters;
  DrafterRepo r = { 0 };
  TestDrafter fits, other;
  TestHead model;
  GSList *uris;

  test_head_random (&model, rand);
  test_drafter_for_27b (&fits);
  test_drafter_for_27b (&other);
  other.hidden_size = 4096;
  r.files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_bytes_unref);
  r.trees = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  {
    GBytes *org[] = { test_head_build (&model), test_drafter_build (&fits),
                      test_drafter_build (&other) };
    const char *zlab_names[] = { "config.json", "model.safetensors" };
    g_autofree guint8 *weights = g_malloc (1 << 16);
    GBytes *zlab[2];

    for (guint i = 0; i < 1 << 16; i++)
      weights[i] = g_rand_int (rand);
    zlab[0] = g_bytes_new_static (zlab_config, strlen (zlab_config));
    zlab[1] = g_bytes_new (weights, 1 << 16);
    g_hash_table_insert (r.trees, (gpointer) "/api/models/org/models/tree/main",
                         add_files (&r, "/org/models", names, org, 3));
    g_hash_table_insert (r.trees, (gpointer) ("/api/models" ZLAB "/tree/main"),
                         add_files (&r, ZLAB, zlab_names, zlab, 2));
  }
  soup_server_add_handler (server, NULL, serve_drafter_repo, &r, NULL);
  g_assert_true (soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
  uris = soup_server_get_uris (server);
  endpoint = g_strdup_printf ("http://127.0.0.1:%d", g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  g_setenv ("HF_ENDPOINT", endpoint, TRUE);

  /* A local drafter for another vocabulary, and a preset that asks for speculation (mtp). */
  other.hidden_size = 5120;
  other.vocab_size = 151936;
  local_other = test_drafter_write (f->dir, "local-other.mcapy", &other);
  g_assert_true (dcp_window_apply_preset (f->window, "medium"));
  gtk_editable_set_text (GTK_EDITABLE (f->window->repo_row), "org/models");
  g_signal_emit_by_name (f->window->repo_row, "apply");
  iterate_until (drafters_listed, f);

  /* Drafters are not models; only the fitting one is offered, and paired at once. */
  g_assert_true (entry_listed (f->window, "qwen-test.mcapy"));
  for (guint i = 1; i < G_N_ELEMENTS (names); i++)
    g_assert_false (entry_listed (f->window, names[i]));
  g_assert_false (entry_listed (f->window, "local-other.mcapy"));
  drafters = dcp_model_list_get_entries (f->window->drafter_list);
  g_assert_cmpuint (drafters->len, ==, 1);
  g_assert_cmpstr (((DcpModelEntry *) drafters->pdata[0])->name, ==, "drafter-fits.mcapy");
  g_assert_cmpstr (dcp_model_list_get_selected (f->window->drafter_list)->name, ==,
                   "drafter-fits.mcapy");
  g_assert_null (dcp_model_list_get_selected (f->window->drafter_list)->local_path);
  note = dcp_model_list_get_note (f->window->drafter_list);
  g_assert_nonnull (strstr (note, "drafter-other.mcapy is for hidden size 4096"));
  g_assert_nonnull (strstr (note, "local-other.mcapy is for a vocabulary of 151936"));
  /* The z-lab checkpoint folder fits: offered for download and conversion. */
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (f->window->checkpoint_list)));
  g_assert_null (strstr (note, "z-lab"));

  /* The costs before anything is downloaded: both speeds, the drafter's VRAM, per preset. */
  speculation = dcp_costs_view_get_text (f->window->costs_view, "speculation");
  g_assert_nonnull (
      strstr (speculation,
              "dflash with drafter-fits.mcapy, up to 15 drafts per step chosen by confidence"));
  g_assert_nonnull (strstr (speculation, "tokens/s with it"));
  g_assert_nonnull (strstr (speculation, "without"));
  g_assert_nonnull (strstr (speculation, "(estimated)"));
  g_assert_nonnull (strstr (speculation, "Drafter: 1.50 GiB weights"));
  presets = dcp_costs_view_get_text (f->window->costs_view, "presets");
  g_assert_nonnull (strstr (presets, "MaxEfficiency: "));
  g_assert_nonnull (strstr (presets, "Medium: "));
  g_assert_nonnull (strstr (presets, "MaxQuality: "));
  g_assert_nonnull (strstr (presets, "(dflash)"));

  /* Load server waits for the drafter's download. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.load", NULL));
  g_assert_cmpint (dcp_engine_process_get_state (f->window->engine), ==, DCP_ENGINE_STOPPED);
  g_assert_true (dcp_model_list_download (f->window->drafter_list, "drafter-fits.mcapy"));
  iterate_until (drafter_downloaded, f);
  g_assert_cmpstr (dcp_model_list_get_selected (f->window->drafter_list)->local_path, ==,
                   drafter_path);

  /* The engine gets the drafter on its command line, and Copy gives the same. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.load", NULL));
  iterate_until (engine_ended, f);
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  log = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
  want = g_strdup_printf ("--speculator dflash --drafter %s", drafter_path);
  {
    const char *args = strstr (log, "args: ");
    g_autofree char *line = NULL;
    g_autofree char *copied = copy_text (f);
    g_autofree char *quoted = g_shell_quote (drafter_path);
    g_autofree char *copied_drafter = g_strdup_printf ("--drafter %s", quoted);

    g_assert_nonnull (args);
    line = g_strndup (args, strcspn (args, "\n"));

    g_assert_nonnull (strstr (line, want));
    g_assert_nonnull (strstr (copied, "--speculator 'dflash'"));
    g_assert_null (strstr (copied, "--speculator 'mtp'"));
    g_assert_nonnull (strstr (copied, copied_drafter));
  }

  /* No drafter: the preset's mtp, from the settings file alone. */
  dcp_model_list_select (f->window->drafter_list, NULL);
  g_assert_null (dcp_window_get_drafter (f->window, NULL));
  g_assert_nonnull (strstr (dcp_costs_view_get_text (f->window->costs_view, "speculation"),
                            "mtp, 4 drafts per step"));
  {
    g_autofree char *copied = copy_text (f);

    g_assert_null (strstr (copied, "--drafter"));
    g_assert_nonnull (strstr (copied, "--speculator 'mtp'"));
  }

  /* The checkpoint folder: downloaded (SHA-256 checked), converted, listed and paired. The
   * converter here checks the folder and writes a drafter head where it is asked to. */
  {
    g_autofree char *prepared = test_drafter_write (f->dir, "prepared.bin", &fits);
    g_autofree char *converter = g_build_filename (f->dir, "fake-convert", NULL);
    g_autofree char *script =
        g_strdup_printf ("#!/bin/sh\n"
                         "cmp -s \"$1/config.json\" '%s/config.json' || exit 5\n"
                         "[ -f \"$1/model.safetensors\" ] || exit 6\n"
                         "cp '%s' \"$2\"\n",
                         f->dir, prepared);
    g_autofree char *folder =
        g_build_filename (f->dir, "checkpoints", "z-lab_Qwen3.5-27B-DFlash", NULL);
    g_autofree char *config = g_build_filename (f->dir, "config.json", NULL);
    g_autofree char *converted = g_build_filename (f->dir, "Qwen3.5-27B-DFlash.mcapy", NULL);
    g_autofree char *copied = NULL, *quoted = g_shell_quote (converted), *expected = NULL;
    g_autofree char *weights = NULL;
    gsize weights_len = 0;

    g_assert_true (g_file_set_contents (config, zlab_config, -1, NULL));
    g_assert_true (g_file_set_contents (converter, script, -1, NULL));
    g_assert_cmpint (g_chmod (converter, 0755), ==, 0);
    g_setenv ("DECAPYBARA_CONVERT", converter, TRUE);
    g_assert_true (
        dcp_checkpoint_list_start (f->window->checkpoint_list, "z-lab/Qwen3.5-27B-DFlash"));
    iterate_until (checkpoint_paired, f);
    g_unsetenv ("DECAPYBARA_CONVERT");
    g_assert_true (g_file_get_contents (g_build_filename (folder, "model.safetensors", NULL),
                                        &weights, &weights_len, NULL));
    g_assert_cmpmem (
        weights, weights_len,
        g_bytes_get_data (g_hash_table_lookup (r.files, ZLAB "/resolve/main/model.safetensors"),
                          NULL),
        1 << 16);
    g_assert_cmpstr (dcp_model_list_get_selected (f->window->drafter_list)->local_path, ==,
                     converted);
    /* Its drafter file is listed now: the folder is not offered again. */
    g_assert_false (gtk_widget_get_visible (GTK_WIDGET (f->window->checkpoint_list)));
    copied = copy_text (f);
    expected = g_strdup_printf ("--drafter %s", quoted);
    g_assert_nonnull (strstr (copied, expected));
  }
  g_unsetenv ("HF_ENDPOINT");
  g_hash_table_unref (r.files);
  g_hash_table_unref (r.trees);
}

static gboolean
engine_ended (Fixture *f)
{
  return dcp_engine_process_get_state (f->window->engine) == DCP_ENGINE_FAILED;
}

static void
test_engine_crash (Fixture *f, gconstpointer data)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (f->window->log_view);
  g_autofree char *log = NULL;
  GtkTextIter start, end;

  gtk_editable_set_text (GTK_EDITABLE (f->window->key_entry), "sk-env-only");
  g_assert_true (dcp_window_apply_preset (f->window, "medium"));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.load", NULL));
  g_assert_false (gtk_widget_get_visible (f->window->load_button));
  iterate_until (engine_ended, f);
  /* Reported, not hidden: the state row has the status and the last line; the log has all. */
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (f->window->engine_row), "status 4"));
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (f->window->engine_row), "cannot allocate the KV pool"));
  g_assert_true (gtk_widget_get_visible (f->window->load_button));
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  log = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
  /* Every setting reached the engine in the file it reads, the key not. */
  g_assert_nonnull (strstr (log, "\"kv-bits\":\"6/4\""));
  g_assert_nonnull (strstr (log, "\"port\":\"8080\""));
  g_assert_nonnull (strstr (log, "\"backend\":\"cuda\""));
  g_assert_null (strstr (strstr (log, "settings: "), "sk-env-only"));
  /* The key reached the engine through its environment, not its command line. */
  g_assert_nonnull (strstr (log, "key: sk-env-only"));
  {
    const char *args = strstr (log, "args: ");
    g_autofree char *line = NULL;

    g_assert_nonnull (args);
    line = g_strndup (args, strcspn (args, "\n"));
    g_assert_nonnull (strstr (line, "--settings"));
    g_assert_null (strstr (line, "sk-env-only"));
    /* The D-Bus end of the socketpair went with it. */
    g_assert_nonnull (strstr (line, "--dbus-fd 3"));
  }
  /* The toast's Restart is win.load: it starts the engine again (which fails again). */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.load", NULL));
  g_assert_cmpint (dcp_engine_process_get_state (f->window->engine), ==, DCP_ENGINE_STARTING);
  iterate_until (engine_ended, f);
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (f->window->engine_row), "status 4"));
}

/* The vision tower: with vision on, the VRAM the costs show holds its weights and its working
 * set for the largest image (the sizes the model's head gives, not the planner's), and the
 * setting reaches the engine in the file it reads. */
static void
test_vision (Fixture *f, gconstpointer data)
{
  const DcpPlanModel *m = &f->window->meta->plan;
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (f->window->log_view);
  g_autofree char *log = NULL, *vram_off = NULL;
  DcpMemoryPlan off, on;
  GtkTextIter start, end;

  g_assert_cmpuint (m->vision_bytes, ==, f->head.vision);
  g_assert_cmpuint (m->vision_activation_bytes, >, 0);
  /* A context given in tokens: the KV pool stays the same whatever the tower takes. */
  g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "context", "16384"));
  g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "vision", "off"));
  g_assert_cmpint (f->window->settings.vision, ==, DCP_VISION_OFF);
  window_plan (f, &off);
  check_costs (f);
  vram_off = g_strdup (dcp_costs_view_get_text (f->window->costs_view, "vram"));
  g_assert_cmpuint (off.weights_vision, ==, 0);

  g_assert_true (dcp_settings_page_set_value (f->window->settings_page, "vision", "bf16"));
  g_assert_cmpint (f->window->settings.vision, ==, DCP_VISION_BF16);
  window_plan (f, &on);
  check_costs (f);
  g_assert_cmpstr (dcp_costs_view_get_text (f->window->costs_view, "vram"), !=, vram_off);
  g_assert_cmpuint (on.weights_vision, ==, m->vision_bytes);
  g_assert_cmpuint (on.activations - off.activations, ==, m->vision_activation_bytes);
  g_assert_cmpuint (on.kv_pool, ==, off.kv_pool);
  g_assert_cmpuint (on.vram_total - off.vram_total, ==,
                    m->vision_bytes + m->vision_activation_bytes);

  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.load", NULL));
  iterate_until (engine_ended, f);
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  log = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
  g_assert_nonnull (strstr (log, "\"vision\":\"bf16\""));
}

static const char *demo_path;   /* the system data folder's demo model */

static gboolean
entry_listed (DcpWindow *window, const char *name)
{
  GPtrArray *entries = dcp_model_list_get_entries (window->model_list);

  for (guint i = 0; entries != NULL && i < entries->len; i++)
    if (g_str_equal (((DcpModelEntry *) entries->pdata[i])->name, name))
      return TRUE;
  return FALSE;
}

static gboolean
new_file_listed (Fixture *f)
{
  return entry_listed (f->window, "copied.mcapy");
}

static gboolean
new_file_gone (Fixture *f)
{
  return !entry_listed (f->window, "copied.mcapy");
}

/* A new user without a GPU: the installed demo model is listed (from the system data folders)
 * and, the only one, chosen; the CPU backend is chosen from the probe; a file copied into the
 * models folder appears without Refresh; a folder that does not hold the chosen model drops it. */
static void
test_first_start (Fixture *f, gconstpointer data)
{
  g_autofree char *folder = g_build_filename (f->dir, "models", NULL);
  g_autofree char *other = g_build_filename (f->dir, "other", NULL);
  g_autofree char *third = g_build_filename (f->dir, "third", NULL);
  g_autofree char *copied = NULL;
  g_autofree char *two = NULL;

  g_assert_cmpstr (f->window->settings.model, ==, demo_path);
  g_assert_cmpstr (dcp_model_list_get_selected (f->window->model_list)->name, ==, "demo.mcapy");
  /* The probe found no GPU: the CPU backend and its preset. */
  g_assert_cmpint (f->window->settings.backend, ==, DCP_SETTING_BACKEND_CPU);
  g_assert_cmpstr (dcp_window_get_preset_id (f->window), ==, "cpu");

  /* Copied into the watched folder: listed without Refresh; removed: gone. */
  copied = test_head_write (folder, "copied.mcapy", &f->head);
  iterate_until (new_file_listed, f);
  dcp_model_list_select (f->window->model_list, "copied.mcapy");
  g_assert_cmpstr (f->window->settings.model, ==, copied);
  g_assert_cmpint (g_unlink (copied), ==, 0);
  iterate_until (new_file_gone, f);
  /* The chosen file went away: the demo, now the only one, is chosen instead. */
  g_assert_cmpstr (f->window->settings.model, ==, demo_path);

  /* b.mcapy chosen in another folder, then a third folder without it: nothing stays chosen
   * unseen, and Load server has no model to run. */
  g_assert_cmpint (g_mkdir (other, 0755), ==, 0);
  two = test_head_write (other, "b.mcapy", &f->head);
  gtk_editable_set_text (GTK_EDITABLE (f->window->folder_row), other);
  g_signal_emit_by_name (f->window->folder_row, "apply");
  dcp_model_list_select (f->window->model_list, "b.mcapy");
  g_assert_cmpstr (f->window->settings.model, ==, two);
  g_assert_cmpint (g_mkdir (third, 0755), ==, 0);
  g_free (test_head_write (third, "c.mcapy", &f->head));
  gtk_editable_set_text (GTK_EDITABLE (f->window->folder_row), third);
  g_signal_emit_by_name (f->window->folder_row, "apply");
  g_assert_true (entry_listed (f->window, "c.mcapy"));
  g_assert_true (entry_listed (f->window, "demo.mcapy"));
  g_assert_false (entry_listed (f->window, "b.mcapy"));
  g_assert_null (dcp_model_list_get_selected (f->window->model_list));
  g_assert_null (f->window->settings.model);
  g_assert_null (f->window->meta);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.load", NULL));
  g_assert_cmpint (dcp_engine_process_get_state (f->window->engine), ==, DCP_ENGINE_STOPPED);
}

static GtkWidget *shown_chooser;

static gboolean
chooser_shown (Fixture *f)
{
  GListModel *toplevels = gtk_window_get_toplevels ();

  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr(GObject) window = g_list_model_get_item (toplevels, i);

      if (GTK_IS_FILE_CHOOSER_DIALOG (window) && gtk_widget_get_visible (GTK_WIDGET (window)))
        {
          shown_chooser = GTK_WIDGET (window);
          return TRUE;
        }
    }
  return FALSE;
}

static GFile *wanted_folder;

static gboolean
chooser_has_selection (Fixture *f)
{
  g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (shown_chooser));

  return file != NULL && g_file_equal (file, wanted_folder);
}

/* The models folder: relative paths and files refused (nothing saved, the row marked), a
 * missing folder created, ~ expanded; the folder chooser (GtkFileChooserNative) sets it. */
static void
test_models_folder (Fixture *f, gconstpointer data)
{
  g_autofree char *before = g_settings_get_string (f->gsettings, "models-folder");
  g_autofree char *file = g_build_filename (f->dir, "qwen-test.mcapy", NULL);
  g_autofree char *fresh = g_build_filename (f->dir, "new", "models", NULL);
  g_autofree char *chosen = g_build_filename (f->dir, "chosen", NULL);
  g_autofree char *home = NULL, *expected_home = NULL;
  g_autoptr(GFile) chosen_file = g_file_new_for_path (chosen);
  g_autoptr(GError) error = NULL;
  const char *bad[] = { "models", "./models", "relative/dir", file };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *now = NULL;

      gtk_editable_set_text (GTK_EDITABLE (f->window->folder_row), bad[i]);
      g_signal_emit_by_name (f->window->folder_row, "apply");
      now = g_settings_get_string (f->gsettings, "models-folder");
      g_assert_cmpstr (now, ==, before);
      g_assert_true (gtk_widget_has_css_class (GTK_WIDGET (f->window->folder_row), "error"));
    }
  g_assert_null (dcp_window_check_models_folder ("relative", &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  home = dcp_window_check_models_folder ("~", NULL);
  expected_home = g_canonicalize_filename (g_get_home_dir (), NULL);
  g_assert_cmpstr (home, ==, expected_home);

  gtk_editable_set_text (GTK_EDITABLE (f->window->folder_row), fresh);
  g_signal_emit_by_name (f->window->folder_row, "apply");
  g_assert_true (g_file_test (fresh, G_FILE_TEST_IS_DIR));
  g_assert_false (gtk_widget_has_css_class (GTK_WIDGET (f->window->folder_row), "error"));
  {
    g_autofree char *now = g_settings_get_string (f->gsettings, "models-folder");
    g_assert_cmpstr (now, ==, fresh);
  }

  g_assert_cmpint (g_mkdir (chosen, 0755), ==, 0);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.choose-folder", NULL));
  g_assert_nonnull (f->window->folder_dialog);
  g_assert_cmpint (gtk_file_chooser_get_action (GTK_FILE_CHOOSER (f->window->folder_dialog)), ==,
                   GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER);
  /* Without a portal the native chooser shows GTK's own dialog: answer it as a user would. */
  iterate_until (chooser_shown, f);
  g_assert_true (gtk_file_chooser_set_file (GTK_FILE_CHOOSER (shown_chooser), chosen_file, NULL));
  wanted_folder = chosen_file;
  iterate_until (chooser_has_selection, f);
  gtk_dialog_response (GTK_DIALOG (shown_chooser), GTK_RESPONSE_ACCEPT);
  g_assert_null (f->window->folder_dialog);
  {
    g_autofree char *now = g_settings_get_string (f->gsettings, "models-folder");
    g_assert_cmpstr (now, ==, chosen);
  }
  g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (f->window->folder_row)), ==, chosen);
}

static GtkWidget *
find_widget (GtkWidget *root, gboolean (*match) (GtkWidget *w))
{
  if (match (root))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child != NULL; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_widget (child, match);

      if (found != NULL)
        return found;
    }
  return NULL;
}

static gboolean
is_resume_button (GtkWidget *w)
{
  return GTK_IS_BUTTON (w) && g_strcmp0 (gtk_button_get_label (GTK_BUTTON (w)), "_Resume") == 0 &&
         gtk_widget_get_visible (w);
}

static gboolean
is_kept_row (GtkWidget *w)
{
  return ADW_IS_ACTION_ROW (w) && adw_action_row_get_subtitle (ADW_ACTION_ROW (w)) != NULL &&
         strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (w)), "kept (42 %)") != NULL;
}

/* An interrupted download's kept part is shown with Resume, not as "not downloaded yet"; a
 * message too long for a toast gets a short title and its Details. */
static void
test_kept_part (Fixture *f, gconstpointer data)
{
  g_autofree char *state = g_build_filename (f->dir, "remote.mcapy.part.json", NULL);
  g_autofree char *title = NULL;
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  DcpModelEntry *e = g_new0 (DcpModelEntry, 1);
  const char *checksum = "Downloading qwen3.8-27b-medium.mcapy failed: the SHA-256 of the file is "
                         "0123456789abcdef, not fedcba9876543210 as the repository says";

  /* 42 of 100 MiB kept, in two parts. */
  g_assert_true (g_file_set_contents (state, "{\"url\": \"http://127.0.0.1:9/remote.mcapy\", \"size\": 104857600,"
                                      " \"parts\": [[0, 52428799, 22020096], [52428800, 104857599, 22020096]]}", -1, NULL));
  e->name = g_strdup ("remote.mcapy");
  e->url = g_strdup ("http://127.0.0.1:9/remote.mcapy");
  e->size = 104857600;
  g_ptr_array_add (entries, e);
  dcp_model_list_set_entries (f->window->model_list, entries, f->dir);
  g_assert_nonnull (find_widget (GTK_WIDGET (f->window->model_list), is_resume_button));
  g_assert_nonnull (find_widget (GTK_WIDGET (f->window->model_list), is_kept_row));
  g_unlink (state);

  g_assert_null (dcp_window_toast_title ("Command line copied"));
  title = dcp_window_toast_title (checksum);
  g_assert_cmpstr (title, ==, "Downloading qwen3.8-27b-medium.mcapy failed");
  g_free (title);
  title = dcp_window_toast_title ("An unusually long message without any colon in it that goes on and on past the width");
  g_assert_cmpint (g_utf8_strlen (title, -1), ==, DCP_WINDOW_TOAST_CHARS);
  dcp_window_toast (f->window, checksum);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->window), "win.show-message", "s", checksum));
}

static gboolean
is_narrow (Fixture *f)
{
  return f->window->narrow;
}

/* Down to 360 px (the metainfo's display_length): one column, and nothing asks for more width. */
static void
test_narrow (Fixture *f, gconstpointer data)
{
  int min = 0, nat = 0;

  gtk_window_set_default_size (GTK_WINDOW (f->window), 360, 720);
  iterate_until (is_narrow, f);
  g_assert_false (gtk_widget_get_visible (f->window->right_scroll));
  g_assert_true (gtk_widget_get_parent (GTK_WIDGET (f->window->right_box)) == GTK_WIDGET (f->window->left_box));
  gtk_widget_measure (GTK_WIDGET (f->window), GTK_ORIENTATION_HORIZONTAL, -1, &min, &nat, NULL, NULL);
  g_test_message ("narrow: minimum width %d, natural %d", min, nat);
  g_assert_cmpint (min, <=, 360);
  /* The Monitor page too. */
  adw_view_stack_set_visible_child_name (f->window->view_stack, "monitor");
  gtk_widget_measure (GTK_WIDGET (f->window), GTK_ORIENTATION_HORIZONTAL, -1, &min, &nat, NULL, NULL);
  g_assert_cmpint (min, <=, 360);
  adw_view_stack_set_visible_child_name (f->window->view_stack, "setup");

  /* Wide again: two columns. */
  gtk_window_set_default_size (GTK_WINDOW (f->window), 1300, 800);
  g_assert_false (f->window->narrow);
  g_assert_true (gtk_widget_get_visible (f->window->right_scroll));
  g_assert_true (gtk_widget_get_parent (GTK_WIDGET (f->window->right_box)) != GTK_WIDGET (f->window->left_box));
}

int
main (int argc, char **argv)
{
  g_autofree char *share = g_dir_make_tmp ("dcp-window-share-XXXXXX", NULL);
  g_autofree char *demo_dir = g_build_filename (share, "decapybara", "models", NULL);
  g_autofree char *runtime = g_build_filename (share, "run", NULL);
  g_autofree char *data_dirs = g_strconcat (share, ":", g_getenv ("XDG_DATA_DIRS") ? g_getenv ("XDG_DATA_DIRS")
                                                                                  : "/usr/local/share:/usr/share", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  TestHead demo;
  int status;

  /* An installed demo model in a system data folder, and the launcher's run files kept here. */
  g_assert_cmpint (g_mkdir_with_parents (demo_dir, 0755), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (runtime, 0700), ==, 0);
  g_setenv ("XDG_DATA_DIRS", data_dirs, TRUE);
  g_setenv ("XDG_RUNTIME_DIR", runtime, TRUE);
  g_setenv ("GSK_RENDERER", "cairo", TRUE);
  g_test_init (&argc, &argv, NULL);
  test_head_random (&demo, rand);
  demo_path = test_head_write (demo_dir, "demo.mcapy", &demo);
  if (!gtk_init_check ())
    {
      g_print ("1..0 # SKIP no display\n");
      remove_tree (share);
      return 77;
    }
  adw_init ();
  g_test_add ("/window/presets-and-copy", Fixture, NULL, setup, test_presets, teardown);
  g_test_add ("/window/costs", Fixture, NULL, setup, test_costs, teardown);
  g_test_add ("/window/vision", Fixture, NULL, setup, test_vision, teardown);
  g_test_add ("/window/repository-download", Fixture, NULL, setup, test_repository, teardown);
  g_test_add ("/window/engine-crash", Fixture, NULL, setup, test_engine_crash, teardown);
  g_test_add ("/window/every-setting", Fixture, NULL, setup, test_every_setting_has_a_control, teardown);
  g_test_add ("/window/first-start", Fixture, "no-gpu", setup, test_first_start, teardown);
  g_test_add ("/window/models-folder", Fixture, NULL, setup, test_models_folder, teardown);
  g_test_add ("/window/narrow", Fixture, NULL, setup, test_narrow, teardown);
  g_test_add ("/window/kept-part", Fixture, NULL, setup, test_kept_part, teardown);
  g_test_add ("/window/drafter-pairing", Fixture, NULL, setup, test_drafter_pairing, teardown);
  status = g_test_run ();
  remove_tree (share);
  return status;
}
