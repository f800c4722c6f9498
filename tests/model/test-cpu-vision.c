/* SPDX-License-Identifier: MIT */
/* The vision path on the CPU against transformers (tests/models/make-test-models.py,
 * vision-small): for four PNGs of different sizes and aspect ratios, decoding and preprocessing
 * must give the image processor's pixel_values (the same resized 8-bit pixels: within float
 * rounding), and the tower must give its output within the golden tests' bound (relative L2
 * error 1e-4 per embedding), both from our patches and from the golden ones. Then the whole
 * multimodal forward: a prompt with two images between text (the tower's embeddings in place of
 * the image tokens, mRoPE positions) and cached decoding after it, whose positions run from the
 * state's next position, not its token count: every logit row within the same bound and with
 * the same argmax, in one prefill and in chunks that cut through an image. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-cpu-vision.h"
#include "dcp-image-decode.h"
#include "dcp-mrope-positions.h"
#include "golden-data.h"

#define MAX_REL_ERROR 1e-4
#define MAX_PIXEL_ERROR 1e-5

static const char *const images[] = { "wide", "tall", "small", "large" };

typedef struct {
  DcpCheckpoint *checkpoint;
  DcpVisionConfig config;
  DcpCpuVision *vision;
  DcpCpuPool *pool;
  JsonParser *info;
} Fixture;

static float *
read_floats (const char *file, gsize n)
{
  g_autofree char *path = vision_golden_path (file);
  g_autoptr(GError) error = NULL;
  char *data = NULL;
  gsize len = 0;

  g_file_get_contents (path, &data, &len, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (len, ==, n * sizeof (float));
  return (float *) data;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autofree char *dir =
      g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small", NULL);
  g_autofree char *tokenizer_dir =
      g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;

  f->checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  vision_golden_config (f->checkpoint, &f->config);
  source = dcp_checkpoint_get_source (f->checkpoint);
  f->vision = dcp_cpu_vision_load (&f->config, &source, &error);
  g_assert_no_error (error);
  f->pool = dcp_cpu_pool_new (2);
  f->info = vision_golden_info ();
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_object_unref (f->info);
  dcp_cpu_pool_free (f->pool);
  dcp_cpu_vision_free (f->vision);
  dcp_checkpoint_free (f->checkpoint);
}

static JsonObject *
image_info (Fixture *f, const char *name)
{
  JsonObject *root = json_node_get_object (json_parser_get_root (f->info));

  return json_object_get_object_member (json_object_get_object_member (root, "images"), name);
}

static double
rel_error (const float *ours, const float *golden, gsize n)
{
  double diff = 0, norm = 0;

  for (gsize i = 0; i < n; i++)
    {
      diff += ((double) ours[i] - golden[i]) * ((double) ours[i] - golden[i]);
      norm += (double) golden[i] * golden[i];
    }
  return sqrt (diff / norm);
}

/* The tower's output for grid against the golden, embedding by embedding. */
static void
check_tower (Fixture *f, const char *name, const float *patches, const DcpVisionGrid *grid)
{
  guint tokens = dcp_vision_config_n_tokens (&f->config, grid->h, grid->w),
        d = f->config.out_hidden_size;
  g_autofree char *file = g_strconcat (name, ".tower.f32", NULL);
  g_autofree float *golden = read_floats (file, (gsize) tokens * d);
  g_autofree float *out = g_new (float, (gsize) tokens *d);
  double worst = 0;

  dcp_cpu_vision_forward (f->vision, f->pool, patches, grid, out);
  for (guint t = 0; t < tokens; t++)
    {
      double e = rel_error (out + (gsize) t * d, golden + (gsize) t * d, d);

      if (e > MAX_REL_ERROR)
        g_error ("%s: embedding %u: relative error %.3g (limit %.0e)", name, t, e, MAX_REL_ERROR);
      worst = MAX (worst, e);
    }
  g_test_message ("%s: %u embeddings, worst relative error %.3g", name, tokens, worst);
}

static void
test_images (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < G_N_ELEMENTS (images); i++)
    {
      const char *name = images[i];
      JsonObject *info = image_info (f, name);
      JsonArray *thw = json_object_get_array_member (info, "grid_thw");
      g_autofree char *pixels_name = g_strconcat (name, ".pixels.f32", NULL);
      g_autofree float *patches = NULL, *golden = NULL;
      gsize n;
      guint width = 0, height = 0, pw = dcp_vision_patch_width (&f->config);
      DcpVisionGrid grid;
      double worst = 0;

      patches = vision_golden_patches (&f->config, name, &width, &height, &grid);
      g_assert_cmpuint (width, ==, json_object_get_int_member (info, "width"));
      g_assert_cmpuint (height, ==, json_object_get_int_member (info, "height"));
      g_assert_cmpuint (grid.t, ==, json_array_get_int_element (thw, 0));
      g_assert_cmpuint (grid.h, ==, json_array_get_int_element (thw, 1));
      g_assert_cmpuint (grid.w, ==, json_array_get_int_element (thw, 2));
      n = (gsize) grid.t * grid.h * grid.w * pw;
      golden = read_floats (pixels_name, n);
      for (gsize k = 0; k < n; k++)
        worst = MAX (worst, fabs ((double) patches[k] - golden[k]));
      if (worst > MAX_PIXEL_ERROR)
        g_error ("%s: pixel_values differ by up to %.3g", name, worst);

      check_tower (f, name, patches, &grid);
      check_tower (f, name, golden, &grid);
    }
}

/* A file cut short is refused, not decoded with rows the loader never wrote. */
static void
test_truncated (Fixture *f, gconstpointer data)
{
  g_autofree char *path = vision_golden_path ("wide.png");
  g_autoptr(GError) error = NULL;
  g_autofree char *png = NULL;
  gsize len = 0;
  guint w, h;

  g_file_get_contents (path, &png, &len, &error);
  g_assert_no_error (error);
  g_assert_null (dcp_image_decode_rgb ("wide", (const guint8 *) png, len / 2, &w, &h, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

/* transformers' smart_resize (the values it gives): ties round to even, the bounds scale both sides. */
static void
test_target_size (Fixture *f, gconstpointer data)
{
  static const struct {
    guint w, h, out_w, out_h;
  } cases[] = {
    { 200, 60, 192, 64 },   /* nearest multiples of 32 */
    { 80, 48, 64, 64 },     /* 2.5 -> 2 and 1.5 -> 2: ties to even; 4096 pixels, the minimum */
    { 20, 20, 64, 64 },     /* below min_pixels: scaled up, rounded up */
    { 400, 300, 160, 128 }, /* above max_pixels: scaled down, rounded down */
    { 3000, 16, 896, 32 },  /* long and thin: 96,256 pixels, scaled down to 28,672 ... */
    { 1000, 5, 928, 32 },   /* ... and the short side kept at one factor */
  };
  g_autoptr(GError) error = NULL;
  guint w, h;

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      dcp_vision_target_size (&f->config, cases[i].w, cases[i].h, &w, &h, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (w, ==, cases[i].out_w);
      g_assert_cmpuint (h, ==, cases[i].out_h);
    }
  /* The planner's working set: 96 patches at most (24,576 pixels), 1,536 values each, width 32,
   * MLP 48, 24 embeddings of 64. The CPU's, 96 (1536 + 7 x 32 + 48) + 24 x 64 floats, is below
   * the CUDA tower's: 96 (1536 + 6 x 32 + 48) + 24 x 64 floats, 2 heads x 96^2 scores and 40
   * bytes of tables a patch. */
  g_assert_cmpuint (4 * (96 * (1536 + 7 * 32 + 48) + 24 * 64), <,
                    dcp_vision_config_device_bytes (&f->config, 96, 96));
  g_assert_cmpuint (dcp_vision_config_device_bytes (&f->config, 96, 96), ==,
                    4 * (96 * (1536 + 6 * 32 + 48) + 24 * 64 + 2 * 96 * 96) + 96 * 40);
  g_assert_cmpuint (dcp_vision_config_activation_bytes (&f->config), ==,
                    dcp_vision_config_device_bytes (&f->config, 96, 96));
  g_assert_false (dcp_vision_target_size (&f->config, 201 * 10, 10, &w, &h, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

/* An image's embeddings, through our whole path from its PNG. */
static float *
image_embeddings (Fixture *f, const char *name, DcpVisionGrid *grid)
{
  guint width, height;
  g_autofree float *patches = vision_golden_patches (&f->config, name, &width, &height, grid);
  float *out = g_new (float, (gsize) dcp_vision_config_n_tokens (&f->config, grid->h, grid->w) *
                                 f->config.out_hidden_size);

  dcp_cpu_vision_forward (f->vision, f->pool, patches, grid, out);
  return out;
}

static void
check_logits (const char *what, guint row, const float *ours, const float *golden, guint vocab)
{
  double e = rel_error (ours, golden, vocab);
  guint a = 0, b = 0;

  for (guint i = 1; i < vocab; i++)
    {
      a = ours[i] > ours[a] ? i : a;
      b = golden[i] > golden[b] ? i : b;
    }
  if (e > MAX_REL_ERROR || a != b)
    g_error ("%s row %u: relative error %.3g (limit %.0e), argmax %u, golden %u", what, row, e,
             MAX_REL_ERROR, a, b);
}

/* The prompt in pieces of the given lengths (0-terminated), then the decode ids one at a time. */
static void
run_prompt (Fixture *f, const guint *pieces)
{
  JsonObject *root = json_node_get_object (json_parser_get_root (f->info));
  g_autoptr(GArray) prompt = golden_ids (root, "prompt");
  g_autoptr(GArray) decode = golden_ids (root, "decode");
  JsonArray *order = json_object_get_array_member (root, "prompt_images");
  guint n_images = json_array_get_length (order),
        V = json_object_get_int_member (root, "vocab_size");
  guint n = prompt->len, H = f->config.out_hidden_size, next_pos = 0, image = 0, done = 0;
  g_autofree DcpVisionGrid *grids = g_new0 (DcpVisionGrid, n_images);
  g_autofree float **embeddings = g_new0 (float *, n_images);
  g_autofree const float **rows = g_new0 (const float *, n);
  g_autofree guint32 *positions = NULL;
  g_autofree float *golden = NULL, *golden_decode = NULL, *logits = g_new (float, (gsize) n *V);
  const guint32 *ids = (const guint32 *) prompt->data;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  DcpTensorSource source = dcp_checkpoint_get_source (f->checkpoint);
  DcpSeqState *s;

  for (guint i = 0; i < n_images; i++)
    embeddings[i] = image_embeddings (f, json_array_get_string_element (order, i), &grids[i]);
  /* Image token rows take the images' embeddings in order. */
  for (guint t = 0, k = 0; t < n; t++)
    if (ids[t] == f->config.image_token_id)
      {
        guint per = dcp_vision_config_n_tokens (&f->config, grids[image].h, grids[image].w);

        rows[t] = embeddings[image] + (gsize) k * H;
        if (++k == per)
          image++, k = 0;
      }
  g_assert_cmpuint (image, ==, n_images);
  positions = dcp_mrope_positions (&f->config, ids, n, grids, n_images, 0, &next_pos, &error);
  g_assert_no_error (error);
  g_assert_cmpint ((gint) next_pos - (gint) n, ==, json_object_get_int_member (root, "rope_delta"));

  backend = dcp_backend_cpu_new (dcp_checkpoint_get_config (f->checkpoint), &source, 2, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_backend_takes_embeddings (backend));
  s = dcp_backend_state_new (backend, &error);
  g_assert_no_error (error);
  golden = read_floats ("mm-prefill.f32", (gsize) n * V);
  for (guint p = 0; done < n; p++)
    {
      guint len = pieces[p] ? MIN (pieces[p], n - done) : n - done;
      g_autofree guint32 *chunk_pos = g_new (guint32, 3 * (gsize) len);
      DcpBatchItem item = { s, ids + done, len, DCP_LOGITS_ALL, logits + (gsize) done * V, NULL };

      for (guint axis = 0; axis < 3; axis++)
        memcpy (chunk_pos + axis * len, positions + (gsize) axis * n + done,
                len * sizeof (guint32));
      item.positions = chunk_pos;
      item.embeddings = rows + done;
      dcp_backend_forward (backend, &item, 1, &error);
      g_assert_no_error (error);
      done += len;
    }
  for (guint t = 0; t < n; t++)
    check_logits ("prefill", t, logits + (gsize) t * V, golden + (gsize) t * V, V);

  golden_decode = read_floats ("mm-decode.f32", (gsize) decode->len * V);
  for (guint i = 0; i < decode->len; i++)
    {
      DcpBatchItem item = {
        s, &g_array_index (decode, guint32, i), 1, DCP_LOGITS_LAST, logits, NULL
      };

      dcp_backend_forward (backend, &item, 1, &error);
      g_assert_no_error (error);
      check_logits ("decode", i, logits, golden_decode + (gsize) i * V, V);
    }
  dcp_backend_state_free (backend, s);
  for (guint i = 0; i < n_images; i++)
    g_free (embeddings[i]);
}

static void
test_forward (Fixture *f, gconstpointer data)
{
  static const guint whole[] = { 0 };
  static const guint cut[] = { 7, 5, 9, 1, 0 }; /* the first image's tokens start at 6 */

  run_prompt (f, whole);
  run_prompt (f, cut);
}

static void
test_positions_mismatch (Fixture *f, gconstpointer data)
{
  const guint32 img = f->config.image_token_id;
  const guint32 ids[] = { 1, img, img, img, 2 };
  const DcpVisionGrid grid = { 1, 4, 4 }; /* 4 tokens, the prompt has 3 */
  g_autoptr(GError) error = NULL;
  guint next;

  g_assert_null (
      dcp_mrope_positions (&f->config, ids, G_N_ELEMENTS (ids), &grid, 1, 0, &next, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (dcp_mrope_positions (&f->config, ids, 1, &grid, 1, 0, &next, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/cpu-vision/images", Fixture, NULL, fixture_set_up, test_images, fixture_tear_down);
  g_test_add ("/cpu-vision/truncated", Fixture, NULL, fixture_set_up, test_truncated,
              fixture_tear_down);
  g_test_add ("/cpu-vision/target-size", Fixture, NULL, fixture_set_up, test_target_size,
              fixture_tear_down);
  g_test_add ("/cpu-vision/forward", Fixture, NULL, fixture_set_up, test_forward,
              fixture_tear_down);
  g_test_add ("/cpu-vision/positions-mismatch", Fixture, NULL, fixture_set_up,
              test_positions_mismatch, fixture_tear_down);
  return g_test_run ();
}
