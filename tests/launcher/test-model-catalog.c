/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-model-catalog.h"

static const char tree_json[] =
  "[{\"type\":\"file\",\"oid\":\"aa\",\"size\":1519,\"path\":\".gitattributes\"},"
  " {\"type\":\"directory\",\"oid\":\"bb\",\"size\":0,\"path\":\"extra\"},"
  " {\"type\":\"file\",\"oid\":\"cc\",\"size\":134,\"path\":\"qwen3.8-27b-tiny.mcapy\","
  "  \"lfs\":{\"oid\":\"AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12\",\"size\":13636000000,\"pointerSize\":134}},"
  " {\"type\":\"file\",\"oid\":\"dd\",\"size\":134,\"path\":\"extra/qwen3.8-27b-xxl.mcapy\","
  "  \"lfs\":{\"oid\":\"cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34\",\"size\":25300000000}},"
  " {\"type\":\"file\",\"path\":\"../evil.mcapy\",\"size\":5},"
  " 17, {\"type\":\"file\",\"path\":\"README.md\",\"size\":10}]";

static void
test_parse_tree (void)
{
  g_autoptr(GBytes) json = g_bytes_new_static (tree_json, strlen (tree_json));
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = dcp_model_catalog_parse_tree ("https://hf.example", "org/models", "main", json, &error);
  DcpModelEntry *tiny, *xxl;

  g_assert_no_error (error);
  g_assert_cmpuint (entries->len, ==, 2);
  tiny = entries->pdata[0];
  xxl = entries->pdata[1];
  g_assert_cmpstr (tiny->name, ==, "qwen3.8-27b-tiny.mcapy");
  g_assert_cmpuint (tiny->size, ==, G_GUINT64_CONSTANT (13636000000));
  g_assert_cmpstr (tiny->sha256, ==, "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12");
  g_assert_cmpstr (tiny->url, ==, "https://hf.example/org/models/resolve/main/qwen3.8-27b-tiny.mcapy");
  g_assert_cmpstr (xxl->url, ==, "https://hf.example/org/models/resolve/main/extra/qwen3.8-27b-xxl.mcapy");
  g_assert_null (tiny->local_path);
}

static void
test_parse_garbage (void)
{
  const char *bad[] = { "{\"error\": \"Repository not found\"}", "[", "\xff\xfe", "" };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GBytes) json = g_bytes_new_static (bad[i], strlen (bad[i]));
      g_autoptr(GError) error = NULL;
      g_autoptr(GPtrArray) entries = dcp_model_catalog_parse_tree ("https://hf.example", "org/m", "main", json, &error);

      g_assert_null (entries);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
    }
}

static void
touch (const char *dir, const char *name, gsize size)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *data = g_malloc0 (size);

  g_assert_true (g_file_set_contents (path, data, size, NULL));
}

static void
test_local_and_merge (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dcp-catalog-XXXXXX", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) json = g_bytes_new_static (tree_json, strlen (tree_json));
  g_autoptr(GPtrArray) all = NULL;
  g_autofree char *sub = g_build_filename (dir, "sub.mcapy", NULL);
  GPtrArray *local, *remote;
  const char *names[] = { "qwen3.8-27b-tiny.mcapy", "mine.mcapy", "notes.txt", "x.mcapy.part" };

  touch (dir, names[0], 1000);
  touch (dir, names[1], 10);
  touch (dir, names[2], 1);
  touch (dir, names[3], 1);
  g_mkdir (sub, 0700);
  local = dcp_model_catalog_list_local (dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (local->len, ==, 2);
  g_assert_cmpstr (((DcpModelEntry *) local->pdata[0])->name, ==, "mine.mcapy");

  remote = dcp_model_catalog_parse_tree ("https://hf.example", "org/models", "main", json, NULL);
  all = dcp_model_catalog_merge (local, remote);
  g_assert_cmpuint (all->len, ==, 3);
  {
    DcpModelEntry *mine = all->pdata[0], *tiny = all->pdata[1], *xxl = all->pdata[2];
    g_assert_cmpstr (mine->name, ==, "mine.mcapy");
    g_assert_null (mine->url);
    g_assert_cmpstr (tiny->name, ==, "qwen3.8-27b-tiny.mcapy");
    g_assert_nonnull (tiny->local_path);
    g_assert_nonnull (tiny->url);
    g_assert_nonnull (tiny->sha256);
    g_assert_null (xxl->local_path);
  }

  /* A folder that does not exist yet is an empty catalogue, not an error. */
  {
    g_autofree char *missing = g_build_filename (dir, "nope", NULL);
    g_autoptr(GPtrArray) none = dcp_model_catalog_list_local (missing, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (none->len, ==, 0);
  }
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *path = g_build_filename (dir, names[i], NULL);
      g_unlink (path);
    }
  g_rmdir (sub);
  g_rmdir (dir);
}

typedef struct {
  GMainLoop *loop;
  GPtrArray *entries;
  GError *error;
  char *last_path;
  char *last_auth;
  char *expected_auth;
} Remote;

static void
api_handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  Remote *r = user_data;
  const char *auth = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization");

  g_free (r->last_path);
  r->last_path = g_strdup (path);
  g_free (r->last_auth);
  r->last_auth = g_strdup (auth);
  /* A private repository: listed only with the token. */
  if (g_str_equal (path, "/api/models/org/private/tree/main") && g_strcmp0 (auth, r->expected_auth) != 0)
    soup_server_message_set_status (msg, SOUP_STATUS_UNAUTHORIZED, NULL);
  else if (g_str_equal (path, "/api/models/org/models/tree/main") || g_str_equal (path, "/api/models/org/private/tree/main"))
    soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_STATIC, tree_json, strlen (tree_json));
  else
    soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
  if (soup_server_message_get_status (msg) == 0 || soup_server_message_get_status (msg) == SOUP_STATUS_NONE)
    soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
}

static void
listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Remote *r = user_data;

  r->entries = dcp_model_catalog_list_remote_finish (result, &r->error);
  g_main_loop_quit (r->loop);
}

static void
test_remote (void)
{
  g_autoptr(SoupServer) server = soup_server_new (NULL, NULL);
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *endpoint = NULL;
  Remote r = { g_main_loop_new (NULL, FALSE) };
  GSList *uris;

  soup_server_add_handler (server, NULL, api_handler, &r, NULL);
  soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (server);
  endpoint = g_strdup_printf ("http://127.0.0.1:%d", g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

  dcp_model_catalog_list_remote_async (session, endpoint, "org/models", "main", NULL, NULL, listed, &r);
  g_main_loop_run (r.loop);
  g_assert_no_error (r.error);
  g_assert_cmpuint (r.entries->len, ==, 2);
  g_assert_true (g_str_has_prefix (((DcpModelEntry *) r.entries->pdata[0])->url, endpoint));
  g_clear_pointer (&r.entries, g_ptr_array_unref);

  dcp_model_catalog_list_remote_async (session, endpoint, "org/missing", "main", NULL, NULL, listed, &r);
  g_main_loop_run (r.loop);
  g_assert_error (r.error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
  g_assert_cmpstr (r.last_path, ==, "/api/models/org/missing/tree/main");
  g_clear_error (&r.error);

  /* The token: a private repository lists with it, not without (the redirect rule is
   * dcp_hf_authorize's, tested with the downloads). */
  {
    g_autofree char *token = g_strdup_printf ("hf_%08x", g_random_int ());

    r.expected_auth = g_strconcat ("Bearer ", token, NULL);
    dcp_model_catalog_list_remote_async (session, endpoint, "org/private", "main", NULL, NULL, listed, &r);
    g_main_loop_run (r.loop);
    g_assert_nonnull (r.error);
    g_assert_null (r.last_auth);
    g_clear_error (&r.error);
    dcp_model_catalog_list_remote_async (session, endpoint, "org/private", "main", token, NULL, listed, &r);
    g_main_loop_run (r.loop);
    g_assert_no_error (r.error);
    g_assert_cmpstr (r.last_auth, ==, r.expected_auth);
    g_assert_cmpuint (r.entries->len, ==, 2);
    g_clear_pointer (&r.entries, g_ptr_array_unref);
  }

  g_main_loop_unref (r.loop);
  g_free (r.last_path);
  g_free (r.last_auth);
  g_free (r.expected_auth);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-catalog/parse-tree", test_parse_tree);
  g_test_add_func ("/model-catalog/parse-garbage", test_parse_garbage);
  g_test_add_func ("/model-catalog/local-and-merge", test_local_and_merge);
  g_test_add_func ("/model-catalog/remote", test_remote);
  return g_test_run ();
}
