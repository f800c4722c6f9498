/* SPDX-License-Identifier: MIT */
/* Images through the scheduler on the CPU backend (vision-small, tests/models): a prompt with
 * two images, read in chunks that cut through them, must give the greedy tokens of one direct
 * forward of it; the next turn (the prompt, the answer, more text) resumes from the answer's
 * snapshot; the same turn with another image of the same size in the first image's place (other
 * embeddings, other bytes) must not resume past the first image token, and gives that image's
 * tokens. Bad images are refused at submission. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-cpu-vision.h"
#include "dcp-image-decode.h"
#include "dcp-scheduler.h"

#define MAX_TOKENS 5

static DcpCheckpoint *checkpoint;
static DcpBackend *backend;
static DcpCpuVision *vision;
static DcpVisionConfig vconfig;
static DcpCpuPool *pool;
static guint vocab;

typedef struct {
  GArray *tokens;
  gboolean done;
  DcpSeqFinishReason reason;
  DcpSeqUsage usage;
} Result;

static void
on_token (gpointer user_data, guint32 token)
{
  g_array_append_val (((Result *) user_data)->tokens, token);
}

static void
on_finished (gpointer user_data, DcpSeqFinishReason reason, const DcpSeqUsage *usage,
             const GError *error)
{
  Result *r = user_data;

  g_assert_no_error (error);
  r->done = TRUE;
  r->reason = reason;
  r->usage = *usage;
}

static const DcpSeqCallbacks callbacks = { NULL, on_token, on_finished };

static char *
golden_path (const char *file)
{
  return g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small", "golden", file,
                                NULL);
}

static void
open_model (void)
{
  g_autofree char *dir =
      g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small", NULL);
  g_autofree char *tokenizer_dir =
      g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autofree char *pre_path = g_build_filename (dir, "preprocessor_config.json", NULL);
  g_autoptr(JsonParser) pre = json_parser_new ();
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;

  checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  json_parser_load_from_file (pre, pre_path, &error);
  g_assert_no_error (error);
  dcp_vision_config_from_json (&vconfig, dcp_checkpoint_get_config_json (checkpoint),
                               json_parser_get_root (pre), &error);
  g_assert_no_error (error);
  source = dcp_checkpoint_get_source (checkpoint);
  backend = dcp_backend_cpu_new (dcp_checkpoint_get_config (checkpoint), &source, 1, &error);
  g_assert_no_error (error);
  vision = dcp_cpu_vision_load (&vconfig, &source, &error);
  g_assert_no_error (error);
  pool = dcp_cpu_pool_new (1);
  vocab = dcp_checkpoint_get_config (checkpoint)->vocab_size;
}

/* An image's embeddings from its PNG (scaled by scale: "another image"), its grid and hash. */
static float *
embed_image (const char *name, float scale, DcpVisionGrid *grid, guint64 *hash)
{
  g_autofree char *file = g_strconcat (name, ".png", NULL);
  g_autofree char *path = golden_path (file);
  g_autoptr(GError) error = NULL;
  g_autofree char *png = NULL;
  g_autofree guint8 *rgb = NULL;
  g_autofree float *patches = NULL;
  gsize len = 0, n;
  guint w, h;
  float *out;

  g_file_get_contents (path, &png, &len, &error);
  g_assert_no_error (error);
  rgb = dcp_image_decode_rgb (name, (const guint8 *) png, len, &w, &h, &error);
  g_assert_no_error (error);
  patches = dcp_vision_patches (&vconfig, rgb, w, h, (gsize) w * 3, grid, &error);
  g_assert_no_error (error);
  n = (gsize) dcp_vision_config_n_tokens (&vconfig, grid->h, grid->w) * vconfig.out_hidden_size;
  out = g_new (float, n);
  dcp_cpu_vision_forward (vision, pool, patches, grid, out);
  for (gsize i = 0; i < n; i++)
    out[i] *= scale;
  *hash = dcp_prompt_images_hash ((const guint8 *) png, len) + (scale != 1.0f);
  return out;
}

static GArray *
prompt_ids (void)
{
  g_autofree char *path = golden_path ("vision.json");
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonArray *a;
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint32));

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  a = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "prompt");
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      guint32 id = (guint32) json_array_get_int_element (a, i);
      g_array_append_val (ids, id);
    }
  return ids;
}

/* The prompt's images: "wide" (its embeddings scaled by first_scale) then "tall". */
static DcpPromptImages *
make_images (GArray *ids, float first_scale)
{
  DcpVisionGrid grids[2];
  float *embeddings[2];
  guint64 hashes[2];
  g_autoptr(GError) error = NULL;
  DcpPromptImages *images;

  embeddings[0] = embed_image ("wide", first_scale, &grids[0], &hashes[0]);
  embeddings[1] = embed_image ("tall", 1.0f, &grids[1], &hashes[1]);
  images = dcp_prompt_images_new (&vconfig, (const guint32 *) ids->data, ids->len, 2, grids,
                                  embeddings, hashes, &error);
  g_assert_no_error (error);
  return images;
}

static guint
argmax (const float *x, guint n)
{
  guint best = 0;

  for (guint i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

/* Greedy tokens of one direct forward of the prompt, then one token at a time. */
static GArray *
run_alone (GArray *ids, DcpPromptImages *images)
{
  g_autoptr(GError) error = NULL;
  g_autofree float *logits = g_new (float, vocab);
  GArray *out = g_array_new (FALSE, FALSE, sizeof (guint32));
  DcpSeqState *s = dcp_backend_state_new (backend, &error);
  DcpBatchItem item = { s, (const guint32 *) ids->data, ids->len, DCP_LOGITS_LAST, logits, NULL };
  guint32 tok;

  item.positions = images->positions;
  item.embeddings = images->rows;
  g_assert_true (dcp_backend_forward (backend, &item, 1, &error));
  while (out->len < MAX_TOKENS)
    {
      DcpBatchItem next = { s, &tok, 1, DCP_LOGITS_LAST, logits, NULL };

      tok = argmax (logits, vocab);
      g_array_append_val (out, tok);
      if (out->len < MAX_TOKENS)
        g_assert_true (dcp_backend_forward (backend, &next, 1, &error));
    }
  dcp_backend_state_free (backend, s);
  return out;
}

static void
run (DcpScheduler *sched, GArray *ids, DcpPromptImages *images, Result *r)
{
  g_autoptr(GError) error = NULL;
  DcpSeqParams p = { 0 };
  gboolean busy = TRUE;

  r->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  dcp_sampler_params_init (&p.sampling);
  p.sampling.temperature = 0;
  p.prompt = (const guint32 *) ids->data;
  p.n_prompt = ids->len;
  p.max_tokens = MAX_TOKENS;
  p.images = images;
  dcp_scheduler_submit (sched, &p, &callbacks, r, &error);
  g_assert_no_error (error);
  while (!r->done)
    {
      g_assert_true (dcp_scheduler_step (sched, &busy, &error));
      g_assert_no_error (error);
    }
}

static void
assert_same (GArray *a, GArray *b)
{
  g_assert_cmpuint (a->len, ==, b->len);
  g_assert_cmpmem (a->data, a->len * sizeof (guint32), b->data, b->len * sizeof (guint32));
}

static void
test_prompt (void)
{
  static const guint32 more[] = { 17, 42, 99 };
  g_autoptr(GArray) ids = prompt_ids ();
  g_autoptr(GArray) turn = NULL;
  g_autoptr(DcpPromptImages) images = make_images (ids, 1.0f);
  g_autoptr(DcpPromptImages) turn_images = NULL, turn_other = NULL;
  g_autoptr(GArray) want = run_alone (ids, images);
  g_autoptr(GArray) want_turn = NULL, want_other = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpScheduler) sched = NULL;
  DcpSchedulerConfig config;
  Result first = { 0 }, again = { 0 }, changed = { 0 };
  guint first_image = 0;

  while (g_array_index (ids, guint32, first_image) != vconfig.image_token_id)
    first_image++;
  /* The next turn: the prompt, the answer but its last token (which the state never read), and
   * more text. */
  turn = g_array_copy (ids);
  g_array_append_vals (turn, want->data, want->len - 1);
  g_array_append_vals (turn, more, G_N_ELEMENTS (more));
  turn_images = make_images (turn, 1.0f);
  turn_other = make_images (turn, -3.0f);
  want_turn = run_alone (turn, turn_images);
  want_other = run_alone (turn, turn_other);
  /* The two images differ: so do their greedy continuations here, or the check below could
   * not tell a wrong reuse. */
  g_assert_false (memcmp (want_turn->data, want_other->data, MAX_TOKENS * sizeof (guint32)) == 0);

  dcp_scheduler_config_init (&config);
  config.max_running = 2;
  config.gdn_blocks = 8;
  config.prefill_chunk = 5; /* cuts through both images */
  config.page_tokens = 8;
  config.kv_pages = 64;
  sched = dcp_scheduler_new (backend, &config, &error);
  g_assert_no_error (error);

  run (sched, ids, images, &first);
  assert_same (first.tokens, want);
  g_assert_cmpuint (first.usage.cached_prompt_tokens, ==, 0);

  run (sched, turn, turn_images, &again);
  assert_same (again.tokens, want_turn);
  g_assert_cmpuint (again.usage.cached_prompt_tokens, >, first_image);

  run (sched, turn, turn_other, &changed);
  assert_same (changed.tokens, want_other);
  g_assert_cmpuint (changed.usage.cached_prompt_tokens, <=, first_image);

  g_array_unref (first.tokens);
  g_array_unref (again.tokens);
  g_array_unref (changed.tokens);
}

static void
test_refused (void)
{
  g_autoptr(GArray) ids = prompt_ids ();
  g_autoptr(DcpPromptImages) images = make_images (ids, 1.0f);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpScheduler) sched = NULL;
  DcpSchedulerConfig config;
  DcpSeqParams p = { 0 };

  dcp_scheduler_config_init (&config);
  config.page_tokens = 8;
  config.kv_pages = 16;
  sched = dcp_scheduler_new (backend, &config, &error);
  g_assert_no_error (error);
  dcp_sampler_params_init (&p.sampling);
  p.prompt = (const guint32 *) ids->data;
  p.n_prompt = ids->len - 1; /* the images are laid out for one token more */
  p.max_tokens = 1;
  p.images = images;
  g_assert_cmpuint (dcp_scheduler_submit (sched, &p, &callbacks, NULL, &error), ==, 0);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  open_model ();
  g_test_add_func ("/scheduler-images/prompt", test_prompt);
  g_test_add_func ("/scheduler-images/refused", test_refused);
  status = g_test_run ();
  dcp_cpu_pool_free (pool);
  dcp_cpu_vision_free (vision);
  g_object_unref (backend);
  dcp_checkpoint_free (checkpoint);
  return status;
}
