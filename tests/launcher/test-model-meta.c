/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-costs.h"
#include "dcp-error.h"
#include "dcp-model-meta.h"
#include "launcher-test-util.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

static void
check_plan_model (const DcpModelMeta *meta, const TestHead *h)
{
  g_assert_cmpuint (meta->plan.text_weight_bytes, ==, h->text);
  g_assert_cmpuint (meta->plan.embedding_bytes, ==, h->embedding);
  g_assert_cmpuint (meta->plan.lm_head_bytes, ==, h->lm_head);
  g_assert_cmpuint (meta->plan.mtp_bytes, ==, h->mtp);
  g_assert_cmpuint (meta->plan.vision_bytes, ==, h->vision);
  g_assert_cmpuint (meta->plan.file_bytes, ==, h->file);
  g_assert_cmpuint (meta->plan.config.n_layers, ==, 64);
  g_assert_cmpuint (meta->plan.config.max_position_embeddings, ==, 262144);
  g_assert_cmpstr (meta->recipe, ==, "medium");
}

static void
test_local (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dcp-meta-XXXXXX", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (11);

  for (guint round = 0; round < 4; round++)
    {
      TestHead h;
      g_autofree char *path = NULL;
      g_autoptr(DcpModelMeta) meta = NULL;
      g_autoptr(GError) error = NULL;
      DcpAccuracy a;

      test_head_random (&h, rand);
      /* Round 3: metadata longer than the first read. */
      h.padding = round == 3 ? 400 << 10 : g_rand_int_range (rand, 0, 4096);
      h.with_accuracy = round != 2;
      path = test_head_write (dir, "m.mcapy", &h);
      meta = dcp_model_meta_load (path, &error);
      g_assert_no_error (error);
      check_plan_model (meta, &h);
      g_assert_cmpstr (meta->name, ==, "m.mcapy");
      if (!h.with_accuracy)
        {
          g_assert_false (dcp_model_meta_get_accuracy (meta, 16, 16, &a));
          continue;
        }
      g_assert_true (dcp_model_meta_get_accuracy (meta, 16, 16, &a));
      g_assert_false (a.for_kv);
      g_assert_cmpfloat_with_epsilon (a.kl_divergence, 0.0125, 1e-12);
      g_assert_cmpfloat_with_epsilon (a.top1_agreement, 0.975, 1e-12);
      g_assert_cmpuint (a.tokens, ==, 65536);
      g_assert_cmpfloat_with_epsilon (a.perplexity, 6.5, 1e-12);
      g_assert_cmpfloat_with_epsilon (a.reference_perplexity, 6.25, 1e-12);
      g_assert_true (dcp_model_meta_get_accuracy (meta, 4, 4, &a));
      g_assert_true (a.for_kv);
      g_assert_cmpfloat_with_epsilon (a.kl_divergence, 0.0375, 1e-12);
      g_assert_cmpfloat_with_epsilon (a.top1_agreement, 0.955, 1e-12);
      g_assert_cmpfloat_with_epsilon (a.perplexity, 6.75, 1e-12);
      g_assert_cmpfloat_with_epsilon (a.reference_perplexity, 6.25, 1e-12);
      g_unlink (path);
    }
  g_rmdir (dir);
}

static void
test_damaged (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dcp-meta-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "cut.mcapy", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (12);
  TestHead h;
  g_autoptr(GBytes) bytes = NULL;
  gsize len;
  const guint8 *data;

  test_head_random (&h, rand);
  bytes = test_head_build (&h);
  data = g_bytes_get_data (bytes, &len);
  /* Cut anywhere before the metadata's end, or flip a metadata byte: an error, never a crash. */
  for (guint i = 0; i < 24; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpModelMeta) meta = NULL;
      g_autofree guint8 *copy = g_memdup2 (data, len);
      gsize cut = len;

      if (i % 2 == 0)
        cut = g_rand_int_range (rand, 0, len);
      else
        copy[g_rand_int_range (rand, DCP_MODEL_HEADER_SIZE, len)] ^= 0x20;
      g_assert_true (g_file_set_contents (path, (const char *) copy, cut, NULL));
      meta = dcp_model_meta_load (path, &error);
      g_assert_null (meta);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
      g_assert_nonnull (strstr (error->message, "cut.mcapy"));
    }
  g_unlink (path);
  g_rmdir (dir);
}

/* ---- remote: a loopback server with Range support that counts the requests ---- */

typedef struct {
  GBytes *file;
  guint requests;
  gsize bytes_sent;
  char *expected_auth;     /* a gated file: every request must carry it */
} Server;

static void
serve (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  Server *s = user_data;
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupRange *ranges = NULL;
  int n = 0;
  gsize len;
  const guint8 *data = g_bytes_get_data (s->file, &len);
  goffset end;

  if (s->expected_auth != NULL &&
      g_strcmp0 (soup_message_headers_get_one (req, "Authorization"), s->expected_auth) != 0)
    {
      soup_server_message_set_status (msg, SOUP_STATUS_UNAUTHORIZED, NULL);
      return;
    }

  s->requests++;
  g_assert_true (soup_message_headers_get_ranges (req, len, &ranges, &n));
  g_assert_cmpint (n, ==, 1);
  end = MIN (ranges[0].end, (goffset) len - 1);
  soup_server_message_set_status (msg, SOUP_STATUS_PARTIAL_CONTENT, NULL);
  soup_message_headers_set_content_range (soup_server_message_get_response_headers (msg), ranges[0].start, end, len);
  soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY,
                                    (const char *) data + ranges[0].start, end - ranges[0].start + 1);
  s->bytes_sent += end - ranges[0].start + 1;
  soup_message_headers_free_ranges (req, ranges);
}

static void
fetched (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DcpModelMeta **out = user_data;
  g_autoptr(GError) error = NULL;

  *out = dcp_model_meta_fetch_finish (result, &error);
  g_assert_no_error (error);
}

static void
test_remote (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (13);

  for (guint round = 0; round < 2; round++)
    {
      g_autoptr(SoupServer) server = soup_server_new (NULL, NULL);
      g_autoptr(SoupSession) session = soup_session_new ();
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpModelMeta) meta = NULL;
      g_autofree char *url = NULL, *endpoint = NULL;
      g_autofree char *token = g_strdup_printf ("hf_%08x", g_rand_int (rand));
      GSList *uris;
      Server s = { 0 };
      TestHead h;

      test_head_random (&h, rand);
      h.padding = round == 0 ? 1000 : 600 << 10;
      s.file = test_head_build (&h);
      soup_server_add_handler (server, NULL, serve, &s, NULL);
      g_assert_true (soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
      uris = soup_server_get_uris (server);
      url = g_strdup_printf ("http://127.0.0.1:%d/org/models/resolve/main/big.mcapy", g_uri_get_port (uris->data));
      endpoint = g_strdup_printf ("http://127.0.0.1:%d", g_uri_get_port (uris->data));
      g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

      /* The second round is a gated model: both Range requests need the token. */
      if (round == 1)
        s.expected_auth = g_strconcat ("Bearer ", token, NULL);
      dcp_model_meta_fetch_async (session, url, endpoint, round == 1 ? token : NULL, NULL, fetched, &meta);
      while (meta == NULL)
        g_main_context_iteration (NULL, TRUE);
      check_plan_model (meta, &h);
      g_assert_cmpstr (meta->name, ==, "big.mcapy");
      /* One request when the head fits in the first 256 KiB, two when it does not. */
      g_assert_cmpuint (s.requests, ==, round == 0 ? 1 : 2);
      g_assert_cmpuint (s.bytes_sent, <=, MAX (g_bytes_get_size (s.file), 256u << 10));
      g_bytes_unref (s.file);
      g_free (s.expected_auth);
    }
}

/* ---- costs: the planner's numbers, and the speed formula ---- */

static void
test_costs (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dcp-meta-XXXXXX", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (14);
  static const char *const kv[] = { "16/16", "8/8", "6/6", "6/4", "4/4" };

  for (guint round = 0; round < 30; round++)
    {
      TestHead h;
      g_autofree char *path = NULL;
      g_autoptr(DcpModelMeta) meta = NULL;
      g_auto(DcpSettings) settings = { 0 };
      g_auto(DcpCosts) costs = { 0 };
      g_auto(DcpDeviceReport) device = { 0 };
      g_autofree char *conv = g_strdup_printf ("%d", g_rand_int_range (rand, 1, 17));
      g_autofree char *probe = NULL;
      DcpPlanSettings ps;
      DcpPlanDevice pd;
      DcpMemoryPlan plan;
      double gbps = g_rand_double_range (rand, 500, 5000);
      guint64 free_bytes = (guint64) g_rand_int_range (rand, 24, 141) * GIB;
      guint64 weights, per;

      test_head_random (&h, rand);
      path = test_head_write (dir, "m.mcapy", &h);
      meta = dcp_model_meta_load (path, NULL);
      g_assert_nonnull (meta);
      dcp_settings_init_default (&settings);
      g_assert_true (dcp_settings_set (&settings, "conversations", conv, NULL));
      g_assert_true (dcp_settings_set (&settings, "kv-bits", kv[round % 5], NULL));
      g_assert_true (dcp_settings_set (&settings, "speculator", round % 3 ? "mtp" : "off", NULL));
      probe = g_strdup_printf ("{\"available\": true, \"name\": \"Test GPU\", \"total_bytes\": %" G_GUINT64_FORMAT
                               ", \"free_bytes\": %" G_GUINT64_FORMAT ", \"peak_bandwidth_gbps\": 1.0,"
                               " \"measured_bandwidth_gbps\": %.3f}", free_bytes + GIB, free_bytes, gbps);
      g_assert_true (dcp_device_report_parse (&device, probe, NULL));
      g_assert_true (device.bandwidth_measured);

      dcp_costs_compute (&costs, meta, &settings, &device, 0);
      dcp_settings_to_plan (&settings, &ps);
      pd = (DcpPlanDevice) { free_bytes + GIB, free_bytes };
      g_assert_true (dcp_memory_plan_compute (&plan, &meta->plan, &ps, &pd, NULL));
      g_assert_true (costs.plan_ok);
      g_assert_cmpmem (&costs.plan, sizeof plan, &plan, sizeof plan);

      /* bandwidth / (GPU weights + 2 x DeltaNet state + KV of the context), by hand */
      weights = h.text + h.lm_head + (round % 3 ? h.mtp : 0);
      per = 2 * plan.gdn_bytes_per_conversation + plan.kv_bytes_per_token * DCP_COSTS_SHORT_CONTEXT;
      g_assert_cmpfloat_with_epsilon (costs.tokens_per_s_short, device.bandwidth_gbps * 1e9 / (weights + per), 1e-6);
      g_assert_cmpfloat_with_epsilon (costs.tokens_per_s_all,
                                      settings.conversations * device.bandwidth_gbps * 1e9 / (weights + settings.conversations * per), 1e-6);
      g_assert_cmpfloat (costs.tokens_per_s_full, <=, costs.tokens_per_s_short);
      g_assert_true (costs.have_accuracy);
      g_assert_cmpint (costs.accuracy.for_kv, ==, round % 5 == 4);
      g_unlink (path);
    }
  g_rmdir (dir);
}

static void
test_no_gpu (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dcp-meta-XXXXXX", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (15);
  g_auto(DcpDeviceReport) device = { 0 };
  g_auto(DcpSettings) settings = { 0 };
  g_auto(DcpCosts) costs = { 0 }, unknown = { 0 };
  g_autoptr(DcpModelMeta) meta = NULL;
  g_autofree char *path = NULL;
  TestHead h;

  g_assert_true (dcp_device_report_parse (&device, "{\"available\": false, \"reason\": \"no driver\"}", NULL));
  g_assert_false (device.available);
  g_assert_cmpstr (device.reason, ==, "no driver");
  g_assert_false (dcp_device_report_parse (&device, "[1", NULL));
  dcp_device_report_clear (&device);
  g_assert_true (dcp_device_report_parse (&device, "{\"available\": false, \"reason\": \"no driver\"}", NULL));

  test_head_random (&h, rand);
  path = test_head_write (dir, "m.mcapy", &h);
  meta = dcp_model_meta_load (path, NULL);
  dcp_settings_init_default (&settings);
  /* Planned for the VRAM the user gives; no speed without a bandwidth. */
  dcp_costs_compute (&costs, meta, &settings, &device, 48 * GIB);
  g_assert_true (costs.plan_ok);
  g_assert_false (costs.have_device);
  g_assert_cmpuint (costs.plan.vram_budget, ==, 48 * GIB - GIB / 2);
  g_assert_cmpfloat (costs.tokens_per_s_short, ==, 0);
  /* No model: nothing known. */
  dcp_costs_compute (&unknown, NULL, &settings, &device, 48 * GIB);
  g_assert_false (unknown.have_model);
  g_assert_false (unknown.plan_ok);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-meta/local", test_local);
  g_test_add_func ("/model-meta/damaged", test_damaged);
  g_test_add_func ("/model-meta/remote-range", test_remote);
  g_test_add_func ("/costs/planner-and-speed", test_costs);
  g_test_add_func ("/costs/no-gpu", test_no_gpu);
  return g_test_run ();
}
