/* SPDX-License-Identifier: MIT */
/* The Gated DeltaNet decode step (kernels/gdn-decode.cu) against a C reference written from
 * docs/MODEL.md §2.3 steps 2-8, in double, on random inputs, states and weights (never zeros),
 * over three steps so that the conv and recurrent states carry. Each of out, qkv after the conv,
 * the conv state and the recurrent state passes when ||gpu - ref|| / ||ref|| <= 2e-5. */
#include "config.h"

#include <math.h>

#include <glib.h>

#include "dcp-float16.h"
#include "dcp-kernels.h"

#define CHECK_CUDA(call) g_assert_cmpint ((call), ==, 0)
#define TOLERANCE 2e-5
#define STEPS 3

typedef struct {
  DcpkGdnShape shape;
  int n_seqs;
  int offset;   /* floats between each state's allocation and the state */
} Case;

typedef struct {
  int h_k, h_v, d_k, d_v, width, conv_dim;
  double eps;
  const float *conv_w;   /* conv_dim x width, the BF16 weights decoded */
  const float *a_log, *dt_bias, *norm_w;
} Ref;

static double
silu (double v)
{
  return v / (1 + exp (-v));
}

/* One sequence's step; qkv is overwritten with silu (conv (qkv)) like the kernel does. */
static void
ref_step (const Ref *m, float *qkv, const float *z, const float *b, const float *a,
          float *conv_state, float *state, float *out)
{
  int ratio = m->h_v / m->h_k;
  double *q = g_new (double, m->d_k), *k = g_new (double, m->d_k), *r = g_new (double, m->d_v);

  /* Step 2: causal depthwise conv (tap width-1 is the current token), then silu. */
  for (int c = 0; c < m->conv_dim; c++)
    {
      double u = m->conv_w[c * m->width + m->width - 1] * (double) qkv[c];
      for (int t = 0; t < m->width - 1; t++)
        u += m->conv_w[c * m->width + t] * (double) conv_state[t * m->conv_dim + c];
      for (int t = 0; t + 1 < m->width - 1; t++)
        conv_state[t * m->conv_dim + c] = conv_state[(t + 1) * m->conv_dim + c];
      if (m->width > 1)
        conv_state[(m->width - 2) * m->conv_dim + c] = qkv[c];
      qkv[c] = (float) silu (u);
    }

  for (int j = 0; j < m->h_v; j++)
    {
      int hk = j / ratio;   /* step 6 */
      const float *qh = qkv + hk * m->d_k, *kh = qkv + m->h_k * m->d_k + hk * m->d_k;
      const float *vh = qkv + 2 * m->h_k * m->d_k + j * m->d_v;
      float *S = state + (gsize) j * m->d_k * m->d_v;
      double qq = 0, kk = 0, beta, g, x, oo = 0;

      /* Step 5: L2 norms, q scaled by 1/sqrt(d_k). */
      for (int i = 0; i < m->d_k; i++)
        {
          qq += (double) qh[i] * qh[i];
          kk += (double) kh[i] * kh[i];
        }
      for (int i = 0; i < m->d_k; i++)
        {
          q[i] = qh[i] / sqrt (qq + m->eps) / sqrt ((double) m->d_k);
          k[i] = kh[i] / sqrt (kk + m->eps);
        }
      /* Step 4. */
      beta = 1 / (1 + exp (-(double) b[j]));
      x = (double) a[j] + m->dt_bias[j];
      g = -exp ((double) m->a_log[j]) * (x > 20 ? x : log1p (exp (x)));
      /* Step 7: decay, r = Sᵀk, δ = β (v - r), S += k δᵀ, o = Sᵀq. */
      for (int v = 0; v < m->d_v; v++)
        {
          r[v] = 0;
          for (int i = 0; i < m->d_k; i++)
            {
              S[i * m->d_v + v] = (float) (exp (g) * S[i * m->d_v + v]);
              r[v] += S[i * m->d_v + v] * k[i];
            }
        }
      for (int v = 0; v < m->d_v; v++)
        {
          double delta = beta * (vh[v] - r[v]), o = 0;
          for (int i = 0; i < m->d_k; i++)
            {
              S[i * m->d_v + v] = (float) (S[i * m->d_v + v] + k[i] * delta);
              o += S[i * m->d_v + v] * q[i];
            }
          r[v] = o;   /* r now holds o */
          oo += o * o;
        }
      /* Step 8: gated RMSNorm with plain w and silu(z). */
      for (int v = 0; v < m->d_v; v++)
        out[j * m->d_v + v] = (float) (r[v] / sqrt (oo / m->d_v + m->eps) * m->norm_w[v]
                                       * silu (z[j * m->d_v + v]));
    }
  g_free (q);
  g_free (k);
  g_free (r);
}

static double
rel_err (const float *got, const float *want, gsize n)
{
  double err = 0, norm = 0;

  for (gsize i = 0; i < n; i++)
    {
      err += ((double) got[i] - want[i]) * ((double) got[i] - want[i]);
      norm += (double) want[i] * want[i];
    }
  g_assert_cmpfloat (norm, >, 0);
  return sqrt (err / norm);
}

static void
fill (GRand *rng, float *v, gsize n, double lo, double hi)
{
  for (gsize i = 0; i < n; i++)
    v[i] = (float) g_rand_double_range (rng, lo, hi);
}

static void *
to_device (const void *h, gsize bytes)
{
  void *d = NULL;

  CHECK_CUDA (dcpk_malloc (&d, bytes));
  CHECK_CUDA (dcpk_memcpy_h2d (d, h, bytes));
  return d;
}

/* A device copy of n floats, `offset` floats into its allocation (*alloc, to free). */
static void *
to_device_at (const float *h, gsize n, int offset, void **alloc)
{
  CHECK_CUDA (dcpk_malloc (alloc, (n + offset) * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_h2d ((float *) *alloc + offset, h, n * sizeof (float)));
  return (float *) *alloc + offset;
}

static void
check_case (const Case *c, guint32 seed)
{
  const DcpkGdnShape *sh = &c->shape;
  int conv_dim = 2 * sh->n_k_heads * sh->k_head_dim + sh->n_v_heads * sh->v_head_dim;
  gsize n_qkv = (gsize) c->n_seqs * conv_dim, n_o = (gsize) c->n_seqs * sh->n_v_heads * sh->v_head_dim;
  gsize n_bh = (gsize) c->n_seqs * sh->n_v_heads;
  gsize n_conv_state = (gsize) (sh->conv_width - 1) * conv_dim;
  gsize n_state = (gsize) sh->n_v_heads * sh->k_head_dim * sh->v_head_dim;
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  g_autofree guint16 *conv_w16 = g_new (guint16, (gsize) conv_dim * sh->conv_width);
  g_autofree float *conv_w = g_new (float, (gsize) conv_dim * sh->conv_width);
  g_autofree float *a_log = g_new (float, sh->n_v_heads), *dt_bias = g_new (float, sh->n_v_heads);
  g_autofree float *norm_w = g_new (float, sh->v_head_dim);
  g_autofree float *qkv = g_new (float, n_qkv), *qkv_gpu = g_new (float, n_qkv);
  g_autofree float *z = g_new (float, n_o), *b = g_new (float, n_bh), *a = g_new (float, n_bh);
  g_autofree float *out = g_new (float, n_o), *out_gpu = g_new (float, n_o);
  g_autofree float *conv_states = g_new (float, c->n_seqs * n_conv_state);
  g_autofree float *states = g_new (float, c->n_seqs * n_state);
  g_autofree float *buf = g_new (float, c->n_seqs * MAX (n_state, n_conv_state));
  g_autofree void **d_conv_ptrs = g_new (void *, c->n_seqs), **d_state_ptrs = g_new (void *, c->n_seqs);
  g_autofree void **d_allocs = g_new (void *, 2 * c->n_seqs);
  DcpkGdnWeights weights;
  Ref ref = { sh->n_k_heads, sh->n_v_heads, sh->k_head_dim, sh->v_head_dim, sh->conv_width,
              conv_dim, sh->eps, conv_w, a_log, dt_bias, norm_w };
  void *d_conv_w, *d_a_log, *d_dt_bias, *d_norm_w, *d_qkv, *d_z, *d_b, *d_a, *d_out;
  void *d_conv_ptr_array, *d_state_ptr_array;

  for (gsize i = 0; i < (gsize) conv_dim * sh->conv_width; i++)
    {
      conv_w16[i] = dcp_f32_to_bf16 ((float) g_rand_double_range (rng, -0.6, 0.6));
      conv_w[i] = dcp_bf16_to_f32 (conv_w16[i]);
    }
  fill (rng, a_log, sh->n_v_heads, -1.0, 2.5);
  fill (rng, dt_bias, sh->n_v_heads, -2.0, 2.0);
  fill (rng, norm_w, sh->v_head_dim, 0.5, 1.5);
  fill (rng, conv_states, c->n_seqs * n_conv_state, -2.0, 2.0);
  fill (rng, states, c->n_seqs * n_state, -0.3, 0.3);

  d_conv_w = to_device (conv_w16, (gsize) conv_dim * sh->conv_width * 2);
  d_a_log = to_device (a_log, sh->n_v_heads * sizeof (float));
  d_dt_bias = to_device (dt_bias, sh->n_v_heads * sizeof (float));
  d_norm_w = to_device (norm_w, sh->v_head_dim * sizeof (float));
  for (int s = 0; s < c->n_seqs; s++)
    {
      d_conv_ptrs[s] = to_device_at (conv_states + s * n_conv_state, n_conv_state, c->offset,
                                     &d_allocs[2 * s]);
      d_state_ptrs[s] = to_device_at (states + s * n_state, n_state, c->offset,
                                      &d_allocs[2 * s + 1]);
    }
  d_conv_ptr_array = to_device (d_conv_ptrs, c->n_seqs * sizeof (void *));
  d_state_ptr_array = to_device (d_state_ptrs, c->n_seqs * sizeof (void *));
  CHECK_CUDA (dcpk_malloc (&d_qkv, n_qkv * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_z, n_o * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_b, n_bh * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_a, n_bh * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_out, n_o * sizeof (float)));
  weights.conv_weight = d_conv_w;
  weights.a_log = d_a_log;
  weights.dt_bias = d_dt_bias;
  weights.norm_weight = d_norm_w;

  for (int step = 0; step < STEPS; step++)
    {
      double e_out, e_qkv, e_conv = 0, e_state = 0;

      fill (rng, qkv, n_qkv, -3.0, 3.0);
      fill (rng, z, n_o, -3.0, 3.0);
      fill (rng, b, n_bh, -4.0, 4.0);
      fill (rng, a, n_bh, -4.0, 4.0);
      if (step == STEPS - 1)
        a[0] = 25.0f;   /* softplus's linear branch */
      CHECK_CUDA (dcpk_memcpy_h2d (d_qkv, qkv, n_qkv * sizeof (float)));
      CHECK_CUDA (dcpk_memcpy_h2d (d_z, z, n_o * sizeof (float)));
      CHECK_CUDA (dcpk_memcpy_h2d (d_b, b, n_bh * sizeof (float)));
      CHECK_CUDA (dcpk_memcpy_h2d (d_a, a, n_bh * sizeof (float)));
      CHECK_CUDA (dcpk_gdn_decode (sh, &weights, c->n_seqs, d_qkv, d_z, d_b, d_a,
                                   d_conv_ptr_array, d_state_ptr_array, d_out, NULL));
      for (int s = 0; s < c->n_seqs; s++)
        {
          gsize ov = (gsize) s * sh->n_v_heads * sh->v_head_dim;
          ref_step (&ref, qkv + (gsize) s * conv_dim, z + ov, b + s * sh->n_v_heads,
                    a + s * sh->n_v_heads, conv_states + s * n_conv_state, states + s * n_state,
                    out + ov);
        }
      CHECK_CUDA (dcpk_memcpy_d2h (out_gpu, d_out, n_o * sizeof (float)));
      CHECK_CUDA (dcpk_memcpy_d2h (qkv_gpu, d_qkv, n_qkv * sizeof (float)));
      e_out = rel_err (out_gpu, out, n_o);
      e_qkv = rel_err (qkv_gpu, qkv, n_qkv);
      for (int s = 0; s < c->n_seqs; s++)
        {
          CHECK_CUDA (dcpk_memcpy_d2h (buf, d_state_ptrs[s], n_state * sizeof (float)));
          e_state = MAX (e_state, rel_err (buf, states + s * n_state, n_state));
          if (n_conv_state > 0)
            {
              CHECK_CUDA (dcpk_memcpy_d2h (buf, d_conv_ptrs[s], n_conv_state * sizeof (float)));
              e_conv = MAX (e_conv, rel_err (buf, conv_states + s * n_conv_state, n_conv_state));
            }
        }
      g_test_message ("H_k %d H_v %d d_k %d d_v %d seqs %d offset %d step %d: rel err out %.3g "
                      "qkv %.3g conv state %.3g state %.3g", sh->n_k_heads, sh->n_v_heads,
                      sh->k_head_dim, sh->v_head_dim, c->n_seqs, c->offset, step, e_out, e_qkv,
                      e_conv, e_state);
      g_assert_cmpfloat (e_out, <=, TOLERANCE);
      g_assert_cmpfloat (e_qkv, <=, TOLERANCE);
      g_assert_cmpfloat (e_conv, <=, TOLERANCE);
      g_assert_cmpfloat (e_state, <=, TOLERANCE);
    }

  for (int s = 0; s < 2 * c->n_seqs; s++)
    CHECK_CUDA (dcpk_free (d_allocs[s]));
  CHECK_CUDA (dcpk_free (d_conv_ptr_array));
  CHECK_CUDA (dcpk_free (d_state_ptr_array));
  CHECK_CUDA (dcpk_free (d_conv_w));
  CHECK_CUDA (dcpk_free (d_a_log));
  CHECK_CUDA (dcpk_free (d_dt_bias));
  CHECK_CUDA (dcpk_free (d_norm_w));
  CHECK_CUDA (dcpk_free (d_qkv));
  CHECK_CUDA (dcpk_free (d_z));
  CHECK_CUDA (dcpk_free (d_b));
  CHECK_CUDA (dcpk_free (d_a));
  CHECK_CUDA (dcpk_free (d_out));
}

static void
test_gdn_decode_shapes (void)
{
  static const Case cases[] = {
    { { 16, 48, 128, 128, 4, 1e-6f }, 1 },   /* the 27B: 8 blocks of 16 columns per head */
    { { 16, 48, 128, 128, 4, 1e-6f }, 3 },
    { { 16, 48, 128, 128, 4, 1e-6f }, 12 },
    { { 2, 4, 24, 40, 4, 1e-6f }, 5 },       /* odd-sizes test model: a half-used last block */
    { { 3, 9, 16, 8, 3, 1e-6f }, 2 },        /* ratio 3, tiny heads, conv width 3 */
    { { 1, 2, 203, 96, 2, 1e-6f }, 1 },      /* d_k not a multiple of the 32 row groups */
    { { 2, 2, 64, 200, 4, 1e-6f }, 3 },      /* 32-column blocks, 7 per head, the last 8 wide */
    { { 1, 1, 256, 512, 4, 1e-6f }, 1 },     /* the largest head: 512 threads, 8 rows each */
    { { 1, 3, 20, 10, 4, 1e-6f }, 2 },       /* d_v not a multiple of 4: 4-byte state accesses */
    { { 1, 2, 133, 302, 3, 1e-6f }, 1 },     /* the same: 64 columns, 5 blocks; d_k > 128 */
    { { 2, 4, 24, 40, 4, 1e-6f }, 2, 1 },    /* states not 16-byte aligned: 4-byte accesses */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    check_case (&cases[i], 77 + i);
}

static void
test_gdn_decode_rejects_bad_shapes (void)
{
  DcpkGdnShape bad = { 16, 40, 128, 128, 4, 1e-6f };   /* H_v not a multiple of H_k */
  DcpkGdnWeights weights = { 0 };
  float *p = (float *) 16;

  g_assert_cmpint (dcpk_gdn_decode (&bad, &weights, 1, p, p, p, p, (float **) p, (float **) p, p,
                                    NULL), !=, 0);
  bad.n_v_heads = 48;
  bad.v_head_dim = 513;
  g_assert_cmpint (dcpk_gdn_decode (&bad, &weights, 1, p, p, p, p, (float **) p, (float **) p, p,
                                    NULL), !=, 0);
  bad.v_head_dim = 128;
  bad.k_head_dim = 257;
  g_assert_cmpint (dcpk_gdn_decode (&bad, &weights, 1, p, p, p, p, (float **) p, (float **) p, p,
                                    NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  int count = 0;

  g_test_init (&argc, &argv, NULL);
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      g_print ("no CUDA device: skipped\n");
      return 77;
    }
  g_test_add_func ("/gpu/gdn-decode/shapes", test_gdn_decode_shapes);
  g_test_add_func ("/gpu/gdn-decode/rejects-bad-shapes", test_gdn_decode_rejects_bad_shapes);
  return g_test_run ();
}
