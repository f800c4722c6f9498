/* SPDX-License-Identifier: MIT */
/* kernels/rope.cu against the CPU backend's dcp_cpu_rope (engine/backend/dcp-cpu-ops.c), in
 * place on q inside the interleaved [q | gate] q_proj output and on k, at random positions (and
 * 0) up to the table's context, with the tables engine/model/dcp-rope.c makes: default RoPE
 * (theta 1e7 and 1e4, rotary_dim 64 of 256, odd head sizes, every dim rotary) and YaRN (the 27B
 * with --rope-scaling 1m at positions to 1,048,575; a short original length with mscale's
 * attention factor and a blended ramp). Dims past rotary_dim and the gates must come back bit
 * for bit; the rotated ones pass when ||gpu - ref|| / ||ref|| <= 1e-5 (both compute the angle
 * identically in FP32; sin/cos differ by an ulp or two). mRoPE (dcpk_rope_3d) against
 * dcp_cpu_rope_3d likewise. */
#include "config.h"

#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcpk-test.h"

#define TOLERANCE 1e-5

typedef struct {
  int rotary_dim;
  double theta;
  guint max_pos;          /* positions drawn below it */
  double yarn_factor;     /* 0: default RoPE */
  guint original;         /* YaRN's original length */
  double mscale, mscale_all_dim;
} Rope;

static void
make_table (const Rope *r, DcpRope *rope)
{
  DcpModelConfig c = { 0 };

  c.rotary_dim = (guint) r->rotary_dim;
  c.rope_theta = r->theta;
  c.max_position_embeddings = r->original ? r->original : r->max_pos;
  if (r->yarn_factor > 0)
    {
      dcp_model_config_enable_yarn (&c, r->yarn_factor);
      c.rope_mscale = r->mscale;
      c.rope_mscale_all_dim = r->mscale_all_dim;
    }
  dcp_rope_init (rope, &c);
}

static void
check (int n_rows, int n_heads, int head_dim, int stride, const Rope *r, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n = (gsize) n_rows * n_heads * stride;
  g_autofree float *x = g_new (float, n), *want = g_new (float, n), *got = g_new (float, n);
  g_autofree gint32 *pos = g_new (gint32, n_rows);
  int rotary_dim = r->rotary_dim;
  void *d_x, *d_pos;
  DcpRope rope;
  double e;

  make_table (r, &rope);
  dcpk_test_fill (rng, x, n, -2, 2);
  for (int i = 0; i < n_rows; i++)
    pos[i] = i == 0 ? 0 : g_rand_int_range (rng, 0, (gint32) r->max_pos);
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  d_pos = dcpk_test_to_device (pos, n_rows * sizeof (gint32));
  CHECK_CUDA (dcpk_rope (d_x, n_rows, n_heads, (long) n_heads * stride, stride, rotary_dim,
                         rope.inv_freq, rope.attention_factor, d_pos, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_x, n * sizeof (float)));
  memcpy (want, x, n * sizeof (float));
  for (int i = 0; i < n_rows; i++)
    for (int h = 0; h < n_heads; h++)
      dcp_cpu_rope (want + ((gsize) i * n_heads + h) * stride, &rope, pos[i]);
  e = dcpk_test_rel_err (got, want, n);
  g_test_message ("rows %d heads %d head_dim %d rotary %d theta %g yarn %g: rel err %.3g", n_rows,
                  n_heads, head_dim, rotary_dim, r->theta, r->yarn_factor, e);
  g_assert_cmpfloat (e, <=, TOLERANCE);
  for (gsize h = 0; h < (gsize) n_rows * n_heads; h++)
    g_assert_cmpmem (got + h * stride + rotary_dim, (stride - rotary_dim) * sizeof (float),
                     x + h * stride + rotary_dim, (stride - rotary_dim) * sizeof (float));
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_pos));
}

static void
test_rope_shapes (void)
{
  static const Rope qwen = { 64, 1e7, 262144 }, small = { 10, 1e4, 262144 }, full = { 128, 1e6, 262144 };

  check (7, 24, 256, 512, &qwen, 1);    /* q of the 27B */
  check (7, 4, 256, 256, &qwen, 2);     /* k of the 27B */
  check (3, 2, 40, 40, &small, 3);      /* odd sizes */
  check (2, 3, 128, 128, &full, 4);     /* full rotary */
}

static void
test_rope_yarn (void)
{
  /* --rope-scaling 1m on the 27B: x4 over 262,144 positions. */
  static const Rope qwen_1m = { 64, 1e7, 1048576, 4.0, 262144 };
  /* x8 over 64 positions, theta 1e4: pairs extrapolated, blended and interpolated; mscale's
   * attention factor. */
  static const Rope short_original = { 32, 1e4, 512, 8.0, 64, 0.707, 1.0 };

  check (9, 24, 256, 512, &qwen_1m, 5);
  check (9, 4, 256, 256, &qwen_1m, 6);
  check (5, 3, 64, 64, &short_original, 7);
}

/* dcpk_rope_3d against dcp_cpu_rope_3d: the 27B's q (mRoPE sections 11, 11, 10 of its 32
 * pairs) and odd sections, three independent random position rows. */
static void
check_3d (int n_rows, int n_heads, int stride, const Rope *r, const guint sections[3], guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n = (gsize) n_rows * n_heads * stride;
  g_autofree float *x = g_new (float, n), *want = g_new (float, n), *got = g_new (float, n);
  g_autofree gint32 *pos = g_new (gint32, 3 * n_rows);
  int sec[3] = { (int) sections[0], (int) sections[1], (int) sections[2] };
  void *d_x, *d_pos;
  DcpRope rope;
  double e;

  make_table (r, &rope);
  dcpk_test_fill (rng, x, n, -2, 2);
  for (int i = 0; i < 3 * n_rows; i++)
    pos[i] = g_rand_int_range (rng, 0, (gint32) r->max_pos);
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  d_pos = dcpk_test_to_device (pos, 3 * n_rows * sizeof (gint32));
  CHECK_CUDA (dcpk_rope_3d (d_x, n_rows, n_heads, (long) n_heads * stride, stride, r->rotary_dim,
                            rope.inv_freq, rope.attention_factor, sec, d_pos, n_rows, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_x, n * sizeof (float)));
  memcpy (want, x, n * sizeof (float));
  for (int i = 0; i < n_rows; i++)
    {
      const guint32 p[3] = { pos[i], pos[n_rows + i], pos[2 * n_rows + i] };

      for (int h = 0; h < n_heads; h++)
        dcp_cpu_rope_3d (want + ((gsize) i * n_heads + h) * stride, &rope, sections, p);
    }
  e = dcpk_test_rel_err (got, want, n);
  g_test_message ("mrope rows %d heads %d sections %u/%u/%u: rel err %.3g", n_rows, n_heads,
                  sections[0], sections[1], sections[2], e);
  g_assert_cmpfloat (e, <=, TOLERANCE);
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_pos));
}

static void
test_rope_3d (void)
{
  static const Rope qwen = { 64, 1e7, 262144 }, small = { 16, 1e4, 4096 };
  static const guint qwen_sections[3] = { 11, 11, 10 }, small_sections[3] = { 3, 3, 2 };
  static const guint t_only[3] = { 8, 0, 0 };

  check_3d (7, 24, 256, &qwen, qwen_sections, 8);
  check_3d (5, 2, 64, &small, small_sections, 9);
  check_3d (5, 2, 64, &small, t_only, 10);
}

static void
test_rope_rejects (void)
{
  float *p = (float *) 16;
  float table[512] = { 1 };

  g_assert_cmpint (dcpk_rope (p, 1, 1, 8, 8, 7, table, 1.0f, (gint32 *) p, NULL), !=, 0);
  g_assert_cmpint (dcpk_rope (p, 1, 1, 8, 8, 8, NULL, 1.0f, (gint32 *) p, NULL), !=, 0);
  g_assert_cmpint (dcpk_rope (p, 1, 1, 8, 8, 8, table, 0.0f, (gint32 *) p, NULL), !=, 0);
  g_assert_cmpint (dcpk_rope (p, 1, 1, 2048, 2048, 1024, table, 1.0f, (gint32 *) p, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    {
      g_test_add_func ("/gpu/rope/shapes", test_rope_shapes);
      g_test_add_func ("/gpu/rope/yarn", test_rope_yarn);
      g_test_add_func ("/gpu/rope/3d", test_rope_3d);
      g_test_add_func ("/gpu/rope/rejects", test_rope_rejects);
    }
  return dcpk_test_run (gpu);
}
