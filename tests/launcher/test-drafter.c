/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "dcp-drafter.h"
#include "dcp-drafter-convert.h"
#include "dcp-engine-command.h"
#include "dcp-error.h"
#include "dcp-model-catalog.h"
#include "dcp-model-meta.h"
#include "dcp-speculation-costs.h"
#include "dcp-speculation-stats.h"
#include "launcher-test-util.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

/* Drafter files: their heads read locally and by Range, which models they fit, the speculation
 * costs against the planner by hand, and the engine's command line with a drafter. */

typedef struct {
  char *dir;
  DcpModelMeta *model; /* the 27B config of tests/model, random sizes */
  TestHead head;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (29);
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;

  f->dir = g_dir_make_tmp ("dcp-drafter-XXXXXX", NULL);
  test_head_random (&f->head, rand);
  path = test_head_write (f->dir, "model.mcapy", &f->head);
  f->model = dcp_model_meta_load (path, &error);
  g_assert_no_error (error);
  g_assert_null (f->model->drafter);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autoptr(GDir) d = g_dir_open (f->dir, 0, NULL);
  const char *name;

  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (f->dir, name, NULL);
      g_remove (path);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  dcp_model_meta_free (f->model);
}

static DcpModelMeta *
load_drafter (Fixture *f, const TestDrafter *t, GError **error)
{
  g_autofree char *path = test_drafter_write (f->dir, "drafter.mcapy", t);

  return dcp_model_meta_load (path, error);
}

static void
test_metadata (Fixture *f, gconstpointer data)
{
  TestDrafter t;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelMeta) meta = NULL;
  const DcpDrafterInfo *d;
  DcpPlanDrafter plan;

  test_drafter_for_27b (&t);
  t.mean_accepted = 4.25;
  t.target_name = "Qwen/Qwen3.8-27B";
  meta = load_drafter (f, &t, &error);
  g_assert_no_error (error);
  d = meta->drafter;
  g_assert_nonnull (d);
  g_assert_cmpstr (d->kind, ==, "dflash");
  g_assert_cmpuint (d->block_size, ==, 16);
  g_assert_cmpuint (d->mask_token_id, ==, 248070);
  g_assert_cmpstr (d->target_architecture, ==, "qwen3_5");
  g_assert_cmpuint (d->target_hidden_size, ==, 5120);
  g_assert_cmpuint (d->target_vocab_size, ==, 248320);
  g_assert_cmpuint (d->target_layers, ==, 64);
  g_assert_cmpuint (d->layer_ids->len, ==, 5);
  g_assert_cmpuint (g_array_index (d->layer_ids, guint, 4), ==, 61);
  g_assert_cmpstr (d->target_name, ==, "Qwen/Qwen3.8-27B");
  g_assert_true (d->have_acceptance);
  g_assert_cmpfloat (d->mean_accepted, ==, 4.25);
  g_assert_cmpuint (d->acceptance_block, ==, 16);
  g_assert_cmpstr (d->measured_on, ==, "code prompts");
  g_assert_cmpuint (d->weight_bytes, ==, t.weights);
  /* 5 layers x K and V x 8 heads x 128 x FP32 */
  dcp_drafter_info_plan (d, &plan);
  g_assert_cmpuint (plan.bytes_per_token, ==, 5 * 2 * 8 * 128 * 4);
}

/* Each broken field gives an error that names it, and no drafter. */
static void
test_malformed (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *field;
    guint case_;
  } cases[] = {
    { "drafter.block_size", 0 },          { "drafter.target.hidden_size", 1 },
    { "drafter.target.layer_ids", 2 },    { "drafter.acceptance.mean_accepted", 3 },
    { "drafter.target.architecture", 4 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      TestDrafter t;
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpModelMeta) meta = NULL;

      test_drafter_for_27b (&t);
      switch (cases[i].case_)
        {
        case 0:
          t.block_size = 1;
          break;
        case 1:
          t.hidden_size = 0;
          break;
        case 2:
          t.n_layer_ids = 0;
          break;
        case 3:
          t.mean_accepted = 15.5;
          break; /* more than 15 drafts */
        default:
          t.architecture = "";
          break;
        }
      meta = load_drafter (f, &t, &error);
      g_assert_null (meta);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
      g_assert_nonnull (strstr (error->message, cases[i].field));
      g_assert_nonnull (strstr (error->message, "drafter.mcapy"));
    }
}

static void
test_fits (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *why;
    guint case_;
  } cases[] = {
    { "hidden size 4096", 0 },     { "vocabulary of 151936", 1 },    { "taps layer 64", 2 },
    { "architecture “llama”", 3 }, { "is for Qwen/Qwen3.5-27B", 4 },
  };
  const DcpModelConfig *config = &f->model->plan.config;
  TestDrafter t;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelMeta) good = NULL;

  test_drafter_for_27b (&t);
  good = load_drafter (f, &t, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_drafter_info_fits (good->drafter, config, f->model->architecture,
                                        f->model->model_id, &error));
  g_assert_no_error (error);
  /* The name is compared only when both say one. */
  g_assert_true (
      dcp_drafter_info_fits (good->drafter, config, "qwen3_5", "Qwen/Qwen3.8-27B", NULL));

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(DcpModelMeta) bad = NULL;

      test_drafter_for_27b (&t);
      switch (cases[i].case_)
        {
        case 0:
          t.hidden_size = 4096;
          break;
        case 1:
          t.vocab_size = 151936;
          break;
        case 2:
          t.layer_ids[2] = 64;
          break;
        case 3:
          t.architecture = "llama";
          break;
        default:
          t.target_name = "Qwen/Qwen3.5-27B";
          break;
        }
      bad = load_drafter (f, &t, &error);
      g_assert_no_error (error);
      g_assert_false (
          dcp_drafter_info_fits (bad->drafter, config, "qwen3_5", "Qwen/Qwen3.8-27B", &error));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
      g_assert_nonnull (strstr (error->message, cases[i].why));
      g_clear_error (&error);
    }
}

/* config.json of a DFlash checkpoint folder, both layouts z-lab has used. */
static void
test_checkpoint (Fixture *f, gconstpointer data)
{
  static const char *const configs[] = {
    "{\"architectures\": [\"DFlashDraftModel\"], \"block_size\": 16, \"hidden_size\": 5120, \"vocab_size\": 248320,"
    " \"num_hidden_layers\": 5, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128,"
    " \"num_target_layers\": 64, \"dflash_config\": {\"mask_token_id\": 248070, \"target_layer_ids\": [1, 16, 31, 46, 61]}}",
    "{\"architectures\": [\"DFlashDraftModel\"], \"block_size\": 16, \"hidden_size\": 5120, \"vocab_size\": 248320,"
    " \"num_hidden_layers\": 5, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128,"
    " \"mask_token_id\": 248070, \"target_layer_ids\": [1, 16, 31, 46, 61]}",
  };
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (configs); i++)
    {
      g_autoptr(GBytes) json = g_bytes_new_static (configs[i], strlen (configs[i]));
      g_autoptr(DcpDrafterInfo) d = dcp_drafter_info_new_from_checkpoint (
          json, "z-lab/Qwen3.5-27B-DFlash", 3 * GIB, &error);

      g_assert_no_error (error);
      g_assert_cmpuint (d->block_size, ==, 16);
      g_assert_cmpuint (d->mask_token_id, ==, 248070);
      g_assert_cmpuint (d->layer_ids->len, ==, 5);
      g_assert_cmpuint (d->target_layers, ==, i == 0 ? 64 : 0);
      g_assert_null (d->target_architecture);
      g_assert_cmpuint (d->weight_bytes, ==, 3 * GIB);
      g_assert_true (dcp_drafter_info_fits (d, &f->model->plan.config, "qwen3_5", NULL, &error));
    }
  {
    const char *llama = "{\"architectures\": [\"LlamaForCausalLM\"], \"block_size\": 16}";
    g_autoptr(GBytes) json = g_bytes_new_static (llama, strlen (llama));

    g_assert_null (dcp_drafter_info_new_from_checkpoint (json, "x/y", 0, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
    g_assert_nonnull (strstr (error->message, "x/y/config.json"));
  }
}

/* A repository's file list read as a checkpoint folder: config.json and the weights' LFS sizes at
 * its top level; anything else is not one. */
static void
test_checkpoint_tree (Fixture *f, gconstpointer data)
{
  const char *tree =
      "[{\"type\":\"file\",\"path\":\"config.json\",\"size\":900},"
      "{\"type\":\"file\",\"path\":\"model-1.safetensors\",\"size\":134,\"lfs\":{\"size\":1000}},"
      "{\"type\":\"file\",\"path\":\"model-2.safetensors\",\"size\":2000},"
      "{\"type\":\"file\",\"path\":\"old/model.safetensors\",\"size\":50000},"
      "{\"type\":\"directory\",\"path\":\"old\"}]";
  const char *no_config = "[{\"type\":\"file\",\"path\":\"model.safetensors\",\"size\":10}]";
  g_autoptr(GBytes) a = g_bytes_new_static (tree, strlen (tree));
  g_autoptr(GBytes) b = g_bytes_new_static (no_config, strlen (no_config));
  g_autoptr(GBytes) c = g_bytes_new_static ("{}", 2);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpCheckpointListing) listing =
                 dcp_model_catalog_parse_checkpoint ("http://h", "z-lab/D", "main", a, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (listing->config_url, ==, "http://h/z-lab/D/resolve/main/config.json");
  g_assert_cmpuint (listing->weight_bytes, ==, 3000);
  g_assert_cmpstr (listing->repo, ==, "z-lab/D");
  /* What a download of the folder fetches: config.json and the top level's weights. */
  g_assert_cmpuint (listing->files->len, ==, 3);
  g_assert_cmpstr (((DcpModelEntry *) listing->files->pdata[1])->name, ==, "model-1.safetensors");
  g_assert_cmpuint (((DcpModelEntry *) listing->files->pdata[1])->size, ==, 1000);
  g_assert_cmpstr (((DcpModelEntry *) listing->files->pdata[2])->url, ==,
                   "http://h/z-lab/D/resolve/main/model-2.safetensors");
  g_assert_null (dcp_model_catalog_parse_checkpoint ("http://h", "z-lab/D", "main", b, &error));
  g_assert_no_error (error);
  g_assert_null (dcp_model_catalog_parse_checkpoint ("http://h", "z-lab/D", "main", c, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
}

/* ---- a drafter's head by Range from a loopback server ---- */

static void
serve (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
       gpointer user_data)
{
  GBytes *file = user_data;
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupRange *ranges = NULL;
  int n = 0;
  gsize len;
  const char *bytes = g_bytes_get_data (file, &len);

  if (soup_message_headers_get_ranges (req, len, &ranges, &n))
    {
      goffset end = MIN (ranges[0].end, (goffset) len - 1);

      soup_server_message_set_status (msg, SOUP_STATUS_PARTIAL_CONTENT, NULL);
      soup_message_headers_set_content_range (soup_server_message_get_response_headers (msg),
                                              ranges[0].start, end, len);
      soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY,
                                        bytes + ranges[0].start, end - ranges[0].start + 1);
      soup_message_headers_free_ranges (req, ranges);
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY, bytes, len);
}

static void
fetched (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError *error = NULL;
  DcpModelMeta **out = user_data;

  *out = dcp_model_meta_fetch_finish (result, &error);
  g_assert_no_error (error);
}

static void
test_remote (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupServer) server = soup_server_new (NULL, NULL);
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelMeta) meta = NULL;
  g_autofree char *url = NULL;
  TestDrafter t;
  GBytes *file;
  GSList *uris;

  test_drafter_for_27b (&t);
  file = test_drafter_build (&t);
  soup_server_add_handler (server, NULL, serve, file, (GDestroyNotify) g_bytes_unref);
  g_assert_true (soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
  uris = soup_server_get_uris (server);
  url = g_strdup_printf ("http://127.0.0.1:%d/org/r/resolve/main/d.mcapy",
                         g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  dcp_model_meta_fetch_async (session, url, NULL, NULL, NULL, fetched, &meta);
  while (meta == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_nonnull (meta->drafter);
  g_assert_cmpstr (meta->drafter->name, ==, "d.mcapy");
  g_assert_cmpuint (meta->drafter->weight_bytes, ==, t.weights);
}

/* ---- speculation ---- */

static void
test_resolve (Fixture *f, gconstpointer data)
{
  static const struct {
    DcpSpeculator asked;
    gboolean drafter, head;
    DcpSpeculator got;
    gboolean fell_back;
  } cases[] = {
    { DCP_SPECULATOR_MTP, TRUE, TRUE, DCP_SPECULATOR_DFLASH, FALSE },
    { DCP_SPECULATOR_MTP, FALSE, TRUE, DCP_SPECULATOR_MTP, FALSE },
    { DCP_SPECULATOR_MTP, FALSE, FALSE, DCP_SPECULATOR_OFF, TRUE },
    { DCP_SPECULATOR_DFLASH, TRUE, FALSE, DCP_SPECULATOR_DFLASH, FALSE },
    { DCP_SPECULATOR_DFLASH, FALSE, TRUE, DCP_SPECULATOR_MTP, TRUE },
    { DCP_SPECULATOR_NGRAM, TRUE, TRUE, DCP_SPECULATOR_NGRAM, FALSE },
    { DCP_SPECULATOR_OFF, TRUE, TRUE, DCP_SPECULATOR_OFF, FALSE },
  };
  TestDrafter t;
  g_autoptr(DcpModelMeta) drafter = NULL;
  guint64 mtp_bytes = f->model->plan.mtp_bytes;

  test_drafter_for_27b (&t);
  drafter = load_drafter (f, &t, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(DcpSettings) s = { 0 };
      gboolean fell_back = !cases[i].fell_back;

      dcp_settings_init_default (&s);
      s.speculator = cases[i].asked;
      f->model->plan.mtp_bytes = cases[i].head ? mtp_bytes : 0;
      g_assert_cmpint (dcp_speculation_resolve (
                           &s, f->model, cases[i].drafter ? drafter->drafter : NULL, &fell_back),
                       ==, cases[i].got);
      g_assert_cmpint (fell_back, ==, cases[i].fell_back);
    }
  f->model->plan.mtp_bytes = mtp_bytes;
}

static void
test_expected (Fixture *f, gconstpointer data)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (37);

  g_assert_cmpfloat_with_epsilon (dcp_speculation_expected (0.5, 3), 0.5 + 0.25 + 0.125, 1e-12);
  g_assert_cmpfloat (dcp_speculation_expected (1, 15), ==, 15);
  for (guint i = 0; i < 200; i++)
    {
      guint drafts = g_rand_int_range (rand, 1, 16);
      double rate = g_rand_double_range (rand, 0.01, 0.99);
      double accepted = dcp_speculation_expected (rate, drafts);

      g_assert_cmpfloat_with_epsilon (dcp_speculation_rate_for (accepted, drafts), rate, 1e-9);
    }
}

/* The costs by hand from the planner's own numbers: a verify step reads what a decode step reads
 * plus the drafter's weights and its KV at the short context. */
static void
test_costs (Fixture *f, gconstpointer data)
{
  DcpDeviceReport device = { .available = TRUE,
                             .name = (char *) "Fake",
                             .total_bytes = 141 * GIB,
                             .free_bytes = 139 * GIB,
                             .bandwidth_gbps = 4100,
                             .bandwidth_measured = TRUE };
  g_auto(DcpSettings) s = { 0 }, reserved = { 0 };
  g_auto(DcpCosts) off = { 0 }, with = { 0 };
  TestDrafter t;
  g_autoptr(DcpModelMeta) drafter = NULL;
  DcpSpeculationCosts spec;
  DcpPlanDrafter plan_drafter;
  guint64 per_token = 5 * 2 * 8 * 128 * 4;
  double bytes_per_s = 4100e9, rate, expected, verify;

  test_drafter_for_27b (&t);
  t.mean_accepted = 5.5;
  drafter = load_drafter (f, &t, NULL);
  dcp_settings_init_default (&s);
  g_assert_true (dcp_settings_set (&s, "speculator", "mtp", NULL));
  /* lengths chosen by confidence (the default is a fixed 4): up to the drafter's block - 1 */
  g_assert_true (dcp_settings_set (&s, "draft-length", "0", NULL));
  g_assert_true (dcp_settings_set (&s, "kv-bits", "8/8", NULL));
  /* Enough conversations that the VRAM, not the native context, bounds the pool. */
  g_assert_true (dcp_settings_set (&s, "conversations", "32", NULL));
  g_assert_true (dcp_settings_set (&s, "context-mode", "fixed", NULL));

  /* Without speculation: the plain plan. */
  dcp_settings_init_default (&reserved);
  g_assert_true (dcp_settings_set (&reserved, "kv-bits", "8/8", NULL));
  g_assert_true (dcp_settings_set (&reserved, "conversations", "32", NULL));
  g_assert_true (dcp_settings_set (&reserved, "context-mode", "fixed", NULL));
  dcp_costs_compute (&off, f->model, &reserved, &device, 0);
  g_assert_true (off.plan_ok);

  g_assert_true (dcp_speculation_costs_compute (&spec, f->model, &s, drafter->drafter, &device, 0));
  g_assert_cmpint (spec.speculator, ==, DCP_SPECULATOR_DFLASH);
  g_assert_cmpuint (spec.drafts, ==, 15);
  g_assert_true (spec.measured);
  g_assert_cmpfloat_with_epsilon (spec.tokens_per_s_without, bytes_per_s / off.step_bytes_short,
                                  1e-6);
  g_assert_cmpuint (spec.drafter_weight_bytes, ==, t.weights);
  /* The engine's plan with the drafter: its weights and step buffers beside the model's, its
   * FP32 context beside the model's KV for every token, so the slots shrink by it. */
  dcp_drafter_info_plan (drafter->drafter, &plan_drafter);
  g_assert_cmpuint (plan_drafter.weight_bytes, ==, t.weights);
  g_assert_cmpuint (plan_drafter.bytes_per_token, ==, per_token);
  dcp_costs_compute_with_drafter (&with, f->model, &reserved, &plan_drafter, &device, 0);
  g_assert_true (with.plan_ok);
  g_assert_cmpuint (with.plan.weights_drafter, ==, t.weights);
  g_assert_cmpuint (with.plan.activations, ==, off.plan.activations + plan_drafter.work_bytes);
  /* fixed slots of 32 conversations: what is left past the model and the drafter (and its
   * page of context per conversation), per conversation, over both bytes per token */
  g_assert_cmpuint (with.plan.context_per_conversation, ==,
                    (off.plan.vram_budget - (off.plan.vram_total - off.plan.kv_pool) - t.weights -
                     plan_drafter.work_bytes - 32 * 512 * per_token) /
                        32 / (off.plan.kv_bytes_per_token + per_token) / 512 * 512);
  g_assert_cmpuint (spec.drafter_kv_bytes, ==, with.plan.drafter_context);
  g_assert_cmpuint (spec.drafter_kv_bytes, ==, per_token * (with.plan.pool_tokens + 32 * 512));
  g_assert_cmpuint (spec.context_per_conversation, ==, with.plan.context_per_conversation);
  g_assert_cmpuint (spec.context_per_conversation, <, off.plan.context_per_conversation);
  g_assert_cmpuint (spec.vram_total, ==, with.plan.vram_total);
  g_assert_true (spec.fits);
  /* Measured: 5.5 of 15 drafts; lengths chosen by confidence: the mean as it is. */
  g_assert_true (spec.chosen);
  g_assert_cmpfloat_with_epsilon (spec.expected_accepted, 5.5, 1e-6);
  verify = with.step_bytes_short + t.weights + per_token * DCP_COSTS_SHORT_CONTEXT;
  g_assert_cmpuint (spec.verify_bytes, ==, (guint64) verify);
  /* a verify step of 16 rows takes 2.19 times what its bytes take (measured on the H200) */
  g_assert_cmpfloat_with_epsilon (spec.tokens_per_s_with, 6.5 * bytes_per_s / verify / 2.19, 1e-6);
  g_assert_cmpfloat (spec.tokens_per_s_with, >, spec.tokens_per_s_without);

  /* The measured verify-step factors, and between them */
  g_assert_cmpfloat (dcp_speculation_verify_factor (0), ==, 1.0);
  g_assert_cmpfloat (dcp_speculation_verify_factor (1), ==, 1.0);
  g_assert_cmpfloat_with_epsilon (dcp_speculation_verify_factor (2), 1.81, 1e-12);
  g_assert_cmpfloat_with_epsilon (dcp_speculation_verify_factor (3), 1.815, 1e-12);
  g_assert_cmpfloat_with_epsilon (dcp_speculation_verify_factor (9), 2.15, 1e-12);
  g_assert_cmpfloat_with_epsilon (dcp_speculation_verify_factor (40), 2.19, 1e-12);

  /* A fixed draft length of 4: the measured per-draft rate over 4 drafts. */
  s.draft_length = 4;
  g_assert_true (dcp_speculation_costs_compute (&spec, f->model, &s, drafter->drafter, &device, 0));
  rate = dcp_speculation_rate_for (5.5, 15);
  expected = rate + rate * rate + pow (rate, 3) + pow (rate, 4);
  g_assert_cmpfloat_with_epsilon (spec.expected_accepted, expected, 1e-9);
  g_assert_false (spec.chosen);

  /* Lengths chosen by confidence with a mean measured on blocks of 8: the mean, not its rate
   * spread over the drafter's 15 drafts. */
  s.draft_length = 0;
  drafter->drafter->acceptance_block = 8;
  g_assert_true (dcp_speculation_costs_compute (&spec, f->model, &s, drafter->drafter, &device, 0));
  g_assert_cmpuint (spec.drafts, ==, 15);
  g_assert_cmpfloat_with_epsilon (spec.expected_accepted, 5.5, 1e-9);
  g_assert_cmpfloat (dcp_speculation_expected (dcp_speculation_rate_for (5.5, 7), 15), >, 5.6);

  /* No drafter: the MTP head, read once per draft, and the estimate. */
  s.draft_length = 0;
  g_assert_true (dcp_speculation_costs_compute (&spec, f->model, &s, NULL, &device, 0));
  g_assert_cmpint (spec.speculator, ==, DCP_SPECULATOR_MTP);
  g_assert_false (spec.measured);
  g_assert_cmpuint (spec.drafts, ==, DCP_DRAFT_DEFAULT);
  g_assert_cmpuint (spec.drafter_weight_bytes + spec.drafter_kv_bytes, ==, 0);
  g_assert_cmpfloat_with_epsilon (spec.expected_accepted,
                                  dcp_speculation_expected (DCP_SPECULATION_RATE_MTP, 4), 1e-12);
  dcp_costs_clear (&with);
  dcp_costs_compute (&with, f->model, &s, &device, 0);
  g_assert_cmpuint (spec.verify_bytes, ==,
                    with.step_bytes_short + (DCP_DRAFT_DEFAULT - 1) * with.plan.weights_mtp);

  /* No GPU bandwidth: no speed, the VRAM still. */
  device.bandwidth_gbps = 0;
  g_assert_true (dcp_speculation_costs_compute (&spec, f->model, &s, drafter->drafter, &device, 0));
  g_assert_cmpfloat (spec.tokens_per_s_with, ==, 0);
  g_assert_cmpuint (spec.drafter_weight_bytes, ==, t.weights);
  /* No model: nothing. */
  g_assert_false (dcp_speculation_costs_compute (&spec, NULL, &s, drafter->drafter, &device, 0));
}

/* The engine's argv carries the drafter; the settings file keeps the window's settings. */
static void
test_command (Fixture *f, gconstpointer data)
{
  g_auto(DcpSettings) s = { 0 };
  g_auto(DcpEngineCommand) c = { 0 };
  g_autofree char *settings_path = g_build_filename (f->dir, "settings.json", NULL);
  g_autofree char *drafter_path = g_build_filename (f->dir, "my drafter.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  char *envp[] = { NULL };
  const char *want[] = { "engine", "--settings", settings_path, "--speculator",
                         "dflash", "--drafter",  drafter_path,  NULL };

  dcp_settings_init_default (&s);
  s.speculator = DCP_SPECULATOR_MTP;
  g_assert_true (dcp_engine_command_build (&c, &s, "engine", settings_path, envp, &error));
  dcp_engine_command_add_speculation (&c, &s, DCP_SPECULATOR_DFLASH, drafter_path);
  g_assert_cmpstrv (c.argv, want);

  /* Nothing to add when the settings already say it. */
  g_assert_true (dcp_engine_command_build (&c, &s, "engine", settings_path, envp, &error));
  dcp_engine_command_add_speculation (&c, &s, DCP_SPECULATOR_MTP, NULL);
  g_assert_cmpuint (g_strv_length (c.argv), ==, 3);
  /* No MTP head and no drafter: off. */
  dcp_engine_command_add_speculation (&c, &s, DCP_SPECULATOR_OFF, NULL);
  g_assert_cmpuint (g_strv_length (c.argv), ==, 5);
  g_assert_cmpstr (c.argv[3], ==, "--speculator");
  g_assert_cmpstr (c.argv[4], ==, "off");
}

/* The Monitor's acceptance length from GetStats' counters. */
static void
test_stats (Fixture *f, gconstpointer data)
{
  g_autoptr(JsonNode) first =
                 json_from_string ("{\"scheduler\": {\"steps\": 90, \"verify_steps\": 40,"
                                   " \"drafted_tokens\": 600, \"accepted_tokens\": 130}}",
                                   NULL);
  g_autoptr(JsonNode) second =
                 json_from_string ("{\"scheduler\": {\"verify_steps\": 50,"
                                   " \"drafted_tokens\": 750, \"accepted_tokens\": 185}}",
                                   NULL);
  g_autoptr(JsonNode) none = json_from_string ("{\"scheduler\": {\"verify_steps\": 3}}", NULL);
  DcpSpeculationStats a, b, restarted = { 2, 30, 7 };

  g_assert_true (dcp_speculation_stats_read (first, &a));
  g_assert_cmpuint (a.verify_steps, ==, 40);
  g_assert_cmpuint (a.drafted, ==, 600);
  g_assert_cmpuint (a.accepted, ==, 130);
  g_assert_true (dcp_speculation_stats_read (second, &b));
  g_assert_cmpfloat_with_epsilon (dcp_speculation_stats_accepted_per_step (NULL, &a), 130.0 / 40,
                                  1e-12);
  /* Over the last sample: 55 accepted in 10 steps. */
  g_assert_cmpfloat_with_epsilon (dcp_speculation_stats_accepted_per_step (&a, &b), 5.5, 1e-12);
  g_assert_cmpfloat (dcp_speculation_stats_accepted_per_step (&b, &b), ==, -1);
  /* Counters that went back: a new engine, counted from its start. */
  g_assert_cmpfloat_with_epsilon (dcp_speculation_stats_accepted_per_step (&b, &restarted), 3.5,
                                  1e-12);
  g_assert_false (dcp_speculation_stats_read (none, &a));
}

/* decapybara-convert run on a folder: its file moved into place, or its status and last line. */
static void
converted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError **error = user_data;

  if (!dcp_drafter_convert_finish (result, error) && *error == NULL)
    g_assert_not_reached ();
  if (*error == NULL)
    *error = g_error_new_literal (DCP_ERROR, DCP_ERROR_N_CODES, "done");
}

static GError *
run_converter (const char *converter, const char *folder, const char *target, const char *output)
{
  GError *error = NULL;

  dcp_drafter_convert_async (converter, folder, target, output, NULL, converted, &error);
  while (error == NULL)
    g_main_context_iteration (NULL, TRUE);
  return error;
}

static void
test_convert (Fixture *f, gconstpointer data)
{
  g_autofree char *good = g_build_filename (f->dir, "good-convert", NULL);
  g_autofree char *bad = g_build_filename (f->dir, "bad-convert", NULL);
  g_autofree char *args = g_build_filename (f->dir, "args", NULL);
  g_autofree char *output = g_build_filename (f->dir, "Out-DFlash.mcapy", NULL);
  g_autofree char *written = g_build_filename (f->dir, "drafter.mcapy", NULL);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\necho \"$@\" > '%s'\n"
                                             "for last; do :; done\necho converted > \"$last\"\n",
                                             args);
  g_autofree char *got = NULL;
  g_autofree char *want = g_strdup_printf ("--target-name Qwen/Qwen3.8-27B %s %s", f->dir, written);
  GError *error;

  g_assert_true (g_file_set_contents (good, script, -1, NULL));
  g_assert_true (g_file_set_contents (bad,
                                      "#!/bin/sh\necho reading\necho 'fc.weight: missing' >&2\n"
                                      "echo partial > \"$2\"\nexit 3\n",
                                      -1, NULL));
  g_assert_cmpint (g_chmod (good, 0755), ==, 0);
  g_assert_cmpint (g_chmod (bad, 0755), ==, 0);

  error = run_converter (good, f->dir, "Qwen/Qwen3.8-27B", output);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_N_CODES);
  g_clear_error (&error);
  g_assert_true (g_file_get_contents (args, &got, NULL, NULL));
  g_assert_cmpstr (g_strstrip (got), ==, want);
  g_assert_true (g_file_test (output, G_FILE_TEST_IS_REGULAR));
  g_assert_false (g_file_test (written, G_FILE_TEST_EXISTS));

  g_remove (output);
  error = run_converter (bad, f->dir, NULL, output);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "status 3"));
  g_assert_nonnull (strstr (error->message, "fc.weight: missing"));
  g_clear_error (&error);
  /* Nothing half-written is left, and nothing reached the models folder. */
  g_assert_false (g_file_test (written, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (output, G_FILE_TEST_EXISTS));

  error = run_converter ("/nonexistent/decapybara-convert", f->dir, NULL, output);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_remove (args);
  g_remove (good);
  g_remove (bad);

  g_setenv ("DECAPYBARA_CONVERT", "/opt/x/convert", TRUE);
  g_assert_cmpstr (dcp_drafter_converter_path ("/usr/bin/decapybara"), ==, "/opt/x/convert");
  g_unsetenv ("DECAPYBARA_CONVERT");
  g_assert_cmpstr (dcp_drafter_converter_path ("/usr/bin/decapybara"), ==,
                   "/usr/bin/decapybara-convert");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/drafter/metadata", Fixture, NULL, setup, test_metadata, teardown);
  g_test_add ("/drafter/malformed", Fixture, NULL, setup, test_malformed, teardown);
  g_test_add ("/drafter/fits", Fixture, NULL, setup, test_fits, teardown);
  g_test_add ("/drafter/checkpoint", Fixture, NULL, setup, test_checkpoint, teardown);
  g_test_add ("/drafter/remote", Fixture, NULL, setup, test_remote, teardown);
  g_test_add ("/drafter/checkpoint-tree", Fixture, NULL, setup, test_checkpoint_tree, teardown);
  g_test_add ("/speculation/resolve", Fixture, NULL, setup, test_resolve, teardown);
  g_test_add ("/speculation/expected", Fixture, NULL, setup, test_expected, teardown);
  g_test_add ("/speculation/costs", Fixture, NULL, setup, test_costs, teardown);
  g_test_add ("/speculation/command", Fixture, NULL, setup, test_command, teardown);
  g_test_add ("/speculation/stats", Fixture, NULL, setup, test_stats, teardown);
  g_test_add ("/drafter/convert", Fixture, NULL, setup, test_convert, teardown);
  return g_test_run ();
}
