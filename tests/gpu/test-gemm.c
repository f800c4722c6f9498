/* SPDX-License-Identifier: MIT */
/* The prefill GEMM (kernels/gemm.cu) against C references. Weights: random FP32 quantized by
 * dcp_quantize_rows and decoded by dcp_dequantize_rows (engine/model/dcp-quant.h), every DcpkFormat. Y = X Wᵀ is computed on the
 * GPU whole; up to 12 token rows of it (first, last, spread between) are checked over all n
 * columns against references in double:
 *   BF16 path: Σ W x_bf16 with x rounded to BF16 as the GPU does (the dequantized MX weights are
 *     exact in BF16: at most 3 mantissa bits), so only FP32 accumulation order differs:
 *     bound 1e-4 (one BF16 rounding of x alone would give ~1e-3, so a lost rounding is caught);
 *   FP8 path: (a) Σ Wq xq with W and x quantized on the CPU exactly as the kernels do (E4M3,
 *     W per 128x128 block with a power-of-two scale, x per 1x128 block with amax / 448): bound
 *     1e-3 (FP8 tensor-core partial sums inside a 128-block); a wrong scale layout gives > 1e-2;
 *     (b) Σ W x in exact FP32 inputs: bound 0.08 — E4M3 keeps 3 mantissa bits, an RMS relative
 *     rounding error near 3.5% per operand, about 5% for a product of two rounded operands.
 * The accumulate flag and BF16 activations are checked on a part of the cases. The two weight
 * conversions are also checked alone, bit for bit (test_gemm_conversions). */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib.h>

#include "dcp-float16.h"
#include "dcp-kernels.h"
#include "dcp-quant.h"
#include "dcpk-test.h"

#define SLICE_ROWS 2048          /* a multiple of 128: a slice holds whole FP8 weight tiles */
#define MAX_SAMPLES 12
#define TOL_BF16 1e-4
#define TOL_FP8_EXACT_OPS 1e-3
#define TOL_FP8_VS_FP32 0.08

typedef struct {
  int n, k, m, formats;
} Case;

static gboolean have_fp8;

/* The weight tile scale of gemm.cu: 2^ceil(log2(amax / 448)) >= 2^-126, 1 for a zero or
 * infinite amax. */
static float
pow2_scale (float amax)
{
  int e;
  float f;

  if (!(amax > 0) || isinf (amax))
    return 1.0f;
  f = frexpf (amax / 448.0f, &e);
  return ldexpf (1.0f, MAX (f == 0.5f ? e - 1 : e, -126));
}

static float
e4m3_round (float v)
{
  return dcp_fp8_e4m3_to_f32 (dcp_f32_to_fp8_e4m3 (v));
}

typedef struct {
  DcpDType dtype;
  int n, k, n_samples;
  const int *samples;              /* token rows checked */
  const float *x, *xb, *xq;        /* sampled rows only: n_samples x k */
  guint8 *w;                       /* quantized, whole tensor */
  double *ref_bf16, *ref_fp32, *ref_fp8;   /* n_samples x n */
  guint64 seed;
} Job;

static void
run_slice (gpointer slice_ptr, gpointer job_ptr)
{
  Job *job = job_ptr;
  guint64 r0 = (guint64) (GPOINTER_TO_UINT (slice_ptr) - 1) * SLICE_ROWS;
  guint64 rows = MIN ((guint64) SLICE_ROWS, (guint64) job->n - r0);
  guint64 state = job->seed ^ (r0 * 0x2545f4914f6cdd1dull);
  int k = job->k;
  g_autofree float *src = g_new (float, rows * k);
  g_autofree float *deq = g_new (float, rows * k);
  g_autofree float *wq = g_new (float, rows * k);

  for (guint64 i = 0; i < rows * k; i++)
    src[i] = dcpk_test_next_uniform (&state);
  dcp_quantize_rows (job->dtype, src, job->n, k, r0, rows, 1.0f, job->w);
  dcp_dequantize_rows (job->dtype, job->w, job->n, k, r0, rows, deq);

  /* The FP8 weight: E4M3 per 128x128 tile of the slice. */
  for (guint64 tr = 0; tr < rows; tr += 128)
    for (int tc = 0; tc < k; tc += 128)
      {
        float amax = 0, scale;

        for (guint64 r = tr; r < MIN (tr + 128, rows); r++)
          for (int c = tc; c < MIN (tc + 128, k); c++)
            amax = MAX (amax, fabsf (deq[r * k + c]));
        scale = pow2_scale (amax);
        for (guint64 r = tr; r < MIN (tr + 128, rows); r++)
          for (int c = tc; c < MIN (tc + 128, k); c++)
            wq[r * k + c] = e4m3_round (deq[r * k + c] / scale) * scale;
      }

  for (guint64 r = 0; r < rows; r++)
    for (int s = 0; s < job->n_samples; s++)
      {
        const float *wr = deq + r * k, *qr = wq + r * k;
        const float *xs = job->x + (gsize) s * k, *xbs = job->xb + (gsize) s * k;
        const float *xqs = job->xq + (gsize) s * k;
        double sb = 0, sf = 0, sq = 0;

        for (int i = 0; i < k; i++)
          {
            sb += (double) wr[i] * xbs[i];
            sf += (double) wr[i] * xs[i];
            sq += (double) qr[i] * xqs[i];
          }
        job->ref_bf16[(gsize) s * job->n + r0 + r] = sb;
        job->ref_fp32[(gsize) s * job->n + r0 + r] = sf;
        job->ref_fp8[(gsize) s * job->n + r0 + r] = sq;
      }
}

/* Relative error of the sampled rows of y (m x n) against ref (n_samples x n); reports the
 * first element off by more than 10 x tol (relative to the row's RMS) when there is one. */
static double
sampled_rel_err (const float *y, const double *ref, const double *y0, const int *samples,
                 int n_samples, int n, double tol, const char *what)
{
  double err = 0, norm = 0;
  gboolean reported = FALSE;

  for (int s = 0; s < n_samples; s++)
    {
      double row_norm = 0;

      for (int c = 0; c < n; c++)
        row_norm += ref[(gsize) s * n + c] * ref[(gsize) s * n + c];
      row_norm = sqrt (row_norm / n);
      for (int c = 0; c < n; c++)
        {
          double want = ref[(gsize) s * n + c] + (y0 ? y0[(gsize) s * n + c] : 0);
          double d = y[(gsize) samples[s] * n + c] - want;

          err += d * d;
          norm += want * want;
          if (!reported && fabs (d) > 10 * tol * MAX (row_norm, 1e-30))
            {
              g_test_message ("%s: first bad element token %d column %d: got %g want %g", what,
                              samples[s], c, y[(gsize) samples[s] * n + c], want);
              reported = TRUE;
            }
        }
    }
  g_assert_cmpfloat (norm, >, 0);
  return sqrt (err / norm);
}

static void
check_case (DcpkGemm *gemm, DcpkFormat format, const Case *c, int variant, guint64 seed)
{
  DcpDType dtype = dcpk_test_dtype (format);
  gsize bytes = dcp_quant_tensor_bytes (dtype, c->n, c->k);
  gsize xn = (gsize) c->m * c->k;
  int n_samples = MIN (c->m, MAX_SAMPLES), samples[MAX_SAMPLES];
  g_autofree float *x = g_new (float, xn);
  g_autofree guint16 *x16 = g_new (guint16, xn);
  g_autofree float *xs = g_new (float, (gsize) n_samples * c->k);
  g_autofree float *xbs = g_new (float, (gsize) n_samples * c->k);
  g_autofree float *xqs = g_new (float, (gsize) n_samples * c->k);
  g_autofree float *y = g_new (float, (gsize) c->m * c->n);
  g_autofree float *y0 = g_new (float, (gsize) c->m * c->n);
  g_autofree double *y0s = g_new (double, (gsize) n_samples * c->n);
  g_autofree double *ref_bf16 = g_new (double, (gsize) n_samples * c->n);
  g_autofree double *ref_fp32 = g_new (double, (gsize) n_samples * c->n);
  g_autofree double *ref_fp8 = g_new (double, (gsize) n_samples * c->n);
  g_autofree guint8 *w = g_malloc (bytes);
  guint64 state = seed;
  int n_slices = (c->n + SLICE_ROWS - 1) / SLICE_ROWS;
  gboolean x_bf16 = variant % 2 == 1, accumulate = variant % 3 == 2;
  void *d_w, *d_x, *d_y;
  Job job = { dtype, c->n, c->k, n_samples, samples, xs, xbs, xqs, w, ref_bf16, ref_fp32,
              ref_fp8, seed * 31 + 7 };
  GThreadPool *pool;

  for (int s = 0; s < n_samples; s++)
    samples[s] = n_samples == 1 ? 0 : (int) ((gint64) s * (c->m - 1) / (n_samples - 1));
  for (gsize i = 0; i < xn; i++)
    {
      x[i] = dcpk_test_next_uniform (&state);
      x16[i] = dcp_f32_to_bf16 (x[i]);
    }
  for (gsize i = 0; i < (gsize) c->m * c->n; i++)
    y0[i] = dcpk_test_next_uniform (&state);
  for (int s = 0; s < n_samples; s++)
    {
      const float *xr = x + (gsize) samples[s] * c->k;

      for (int i = 0; i < c->n; i++)
        y0s[(gsize) s * c->n + i] = y0[(gsize) samples[s] * c->n + i];
      for (int i = 0; i < c->k; i++)
        {
          /* The GPU's FP8 path quantizes what it is given: the BF16 x when x_bf16. */
          float v = x_bf16 ? dcp_bf16_to_f32 (dcp_f32_to_bf16 (xr[i])) : xr[i];

          xs[(gsize) s * c->k + i] = v;
          xbs[(gsize) s * c->k + i] = dcp_bf16_to_f32 (dcp_f32_to_bf16 (xr[i]));
        }
      for (int b = 0; b < c->k; b += 128)
        {
          float amax = 0, scale;

          for (int i = b; i < MIN (b + 128, c->k); i++)
            amax = MAX (amax, fabsf (xs[(gsize) s * c->k + i]));
          scale = amax > 0 ? amax / 448.0f : 1.0f;
          for (int i = b; i < MIN (b + 128, c->k); i++)
            xqs[(gsize) s * c->k + i] = e4m3_round (xs[(gsize) s * c->k + i] / scale) * scale;
        }
    }
  pool = g_thread_pool_new (run_slice, &job, (int) g_get_num_processors (), TRUE, NULL);
  for (int s = 0; s < n_slices; s++)
    g_thread_pool_push (pool, GUINT_TO_POINTER (s + 1), NULL);
  g_thread_pool_free (pool, FALSE, TRUE);

  d_w = dcpk_test_to_device (w, bytes);
  d_x = x_bf16 ? dcpk_test_to_device (x16, xn * 2) : dcpk_test_to_device (x, xn * 4);
  CHECK_CUDA (dcpk_malloc (&d_y, (gsize) c->m * c->n * sizeof (float)));

  for (int p = DCPK_GEMM_BF16; p <= DCPK_GEMM_FP8; p++)
    {
      g_autofree char *what = g_strdup_printf ("%s format %d  n %d k %d m %d%s%s",
                                               p == DCPK_GEMM_BF16 ? "bf16" : "fp8", format,
                                               c->n, c->k, c->m, x_bf16 ? " x-bf16" : "",
                                               accumulate ? " accumulate" : "");
      double e1, e2 = 0;

      if (p == DCPK_GEMM_FP8 && !have_fp8)
        continue;
      CHECK_CUDA (dcpk_memcpy_h2d (d_y, y0, (gsize) c->m * c->n * sizeof (float)));
      CHECK_CUDA (dcpk_gemm (gemm, p, format, d_w, c->n, c->k, d_x, x_bf16, c->m, d_y, accumulate));
      CHECK_CUDA (dcpk_synchronize ());
      CHECK_CUDA (dcpk_memcpy_d2h (y, d_y, (gsize) c->m * c->n * sizeof (float)));
      if (p == DCPK_GEMM_BF16)
        {
          e1 = sampled_rel_err (y, ref_bf16, accumulate ? y0s : NULL, samples, n_samples, c->n,
                                TOL_BF16, what);
          g_test_message ("%s: rel err %.3g", what, e1);
          g_assert_cmpfloat (e1, <=, TOL_BF16);
        }
      else
        {
          e1 = sampled_rel_err (y, ref_fp8, accumulate ? y0s : NULL, samples, n_samples, c->n,
                                TOL_FP8_EXACT_OPS, what);
          e2 = sampled_rel_err (y, ref_fp32, accumulate ? y0s : NULL, samples, n_samples, c->n,
                                TOL_FP8_VS_FP32, what);
          g_test_message ("%s: rel err %.3g vs quantized operands, %.3g vs FP32", what, e1, e2);
          g_assert_cmpfloat (e1, <=, TOL_FP8_EXACT_OPS);
          g_assert_cmpfloat (e2, <=, TOL_FP8_VS_FP32);
        }
    }
  CHECK_CUDA (dcpk_free (d_y));
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_w));
}

static void
run_cases (const Case *cases, gsize n_cases)
{
  size_t ws = 0;
  DcpkGemm *gemm = NULL;
  int supported = 0;

  for (gsize i = 0; i < n_cases; i++)
    for (int f = DCPK_FORMAT_BF16; f <= DCPK_FORMAT_MXFP4_E2M1; f++)
      for (int p = DCPK_GEMM_BF16; p <= DCPK_GEMM_FP8; p++)
        ws = MAX (ws, dcpk_gemm_workspace_bytes (p, f, cases[i].m, cases[i].n, cases[i].k));
  CHECK_CUDA (dcpk_gemm_create (ws, NULL, &gemm));
  CHECK_CUDA (dcpk_gemm_fp8_supported (gemm, &supported));
  have_fp8 = supported;
  g_test_message ("FP8 block-scaled path %s", have_fp8 ? "available" : "NOT available here");
  for (gsize i = 0; i < n_cases; i++)
    for (int f = DCPK_FORMAT_BF16; f <= DCPK_FORMAT_MXFP4_E2M1; f++)
      if (cases[i].formats & (1 << f))
        check_case (gemm, (DcpkFormat) f, &cases[i], (int) (i * 5 + f), 2000 + i * 16 + f);
  dcpk_gemm_destroy (gemm);
}

static void
test_gemm_27b_shapes (void)
{
  /* The 27B's prefill GEMMs (MODEL.md §8) at prompt chunk sizes 1 .. 4096. */
  static const Case cases[] = {
    { 10240, 5120, 1000, F_ALL },          /* GDN in_proj_qkv */
    { 6144, 5120, 64, F_ALL },             /* GDN in_proj_z */
    { 48, 5120, 7, F_ALL },                /* GDN in_proj_a, in_proj_b */
    { 5120, 6144, 4096, F_ALL },           /* GDN out_proj, attn o_proj */
    { 12288, 5120, 1, F_BF16 | F_FP8 | F_FP4 },   /* attn q_proj */
    { 1024, 5120, 4096, F_ALL },           /* attn k_proj, v_proj */
    { 17408, 5120, 1000, F_BF16 | F_FP4 }, /* MLP gate, up */
    { 5120, 17408, 64, F_ALL },            /* MLP down */
  };

  run_cases (cases, G_N_ELEMENTS (cases));
}

static void
test_gemm_odd_shapes (void)
{
  /* k not a multiple of 128, 32, 16 or 8; n odd; m not a multiple of 4. */
  static const Case cases[] = {
    { 33, 100, 7, F_ALL },   { 1001, 1000, 1, F_ALL }, { 17, 4100, 1000, F_ALL },
    { 4095, 257, 64, F_ALL }, { 7, 5, 3, F_ALL },     { 130, 129, 4096, F_ALL },
    { 256, 136, 5, F_ALL },
  };

  run_cases (cases, G_N_ELEMENTS (cases));
}

/* The conversions alone, bit for bit, on raw random codes (every code: subnormals, negative
 * zero, the largest; E4M3's NaN codes excepted, see docs/KERNELS.md) under E8M0 scale bytes from
 * the extremes (0, 1, 2, 252..254) to the middle, a unit in eight all zero or negative zero,
 * the padding codes past k random (the kernels must ignore them). Expected: the C reference
 * decode (dcp_dequantize_rows, exact in FP32) rounded to BF16; and per 128x128 tile the
 * power-of-two scale of the finite amax (1 for zero or infinite amax) and E4M3 of value /
 * scale, rounded to nearest even and saturated. */
static const int scale_bases[] = { 0, 1, 2, 5, 100, 127, 130, 200, 252, 253, 254, 127 };

static void
fill_raw_weight (DcpDType dtype, int n, int k, guint8 *w, gsize bytes, guint64 seed)
{
  DcpQuantLayout l;
  guint64 state = seed;

  g_assert_true (dcp_quant_layout (dtype, n, k, &l));
  for (gsize i = 0; i < bytes; i++)
    w[i] = (guint8) (dcpk_test_next_uniform (&state) * 128 + 128);
  if (dtype == DCP_DTYPE_BF16)
    {
      for (gsize i = 0; i < (gsize) n * k; i++)   /* finite BF16 only */
        if ((w[2 * i + 1] & 0x7f) == 0x7f && (w[2 * i] & 0x80))
          w[2 * i + 1] &= 0xbf;
      return;
    }
  for (int r = 0; r < n; r++)
    for (guint64 u = 0; u < l.blocks_per_row; u++)
      {
        guint8 *unit = w + r * l.row_bytes + u * l.block_bytes;
        guint8 *s = w + l.scales_offset + r * l.blocks_per_row + u;
        int base = scale_bases[(r / 128 + (int) (u / 4) * 7) % G_N_ELEMENTS (scale_bases)];
        float pick = dcpk_test_next_uniform (&state);

        *s = (guint8) CLAMP (base - (int) ((pick + 1) * 2), 0, 254);
        if (pick < -0.75f)   /* zero codes: +0, or -0 where a byte holds whole codes */
          memset (unit, pick < -0.875f && dtype != DCP_DTYPE_MXFP6_E2M3 && dtype != DCP_DTYPE_MXFP6_E3M2
                          ? (dtype == DCP_DTYPE_MXFP4_E2M1 ? 0x88 : 0x80) : 0, l.block_bytes);
        if (dtype == DCP_DTYPE_MXFP8_E4M3)
          for (guint i = 0; i < l.block_bytes; i++)
            if ((unit[i] & 0x7f) == 0x7f)   /* no NaN codes */
              unit[i] &= 0xfe;
      }
}

static void
check_conversions (DcpkFormat format, int n, int k, guint64 seed)
{
  DcpDType dtype = dcpk_test_dtype (format);
  gsize bytes = dcp_quant_tensor_bytes (dtype, n, k);
  int ld = (k + 7) / 8 * 8 + 8, n_pad = (n + 15) / 16 * 16, k_pad = (k + 15) / 16 * 16;
  int l = (k_pad + 127) / 128, l4 = (l + 3) / 4 * 4, tiles_n = (n_pad + 127) / 128;
  gsize fp8_bytes = dcpk_gemm_fp8_weight_bytes (n, k);
  gsize scales_at = ((gsize) n_pad * k_pad + 255) / 256 * 256;
  g_autofree guint8 *w = g_malloc (bytes);
  g_autofree float *deq = g_new (float, (gsize) n * k);
  g_autofree guint16 *bf = g_new (guint16, (gsize) n * ld);
  g_autofree guint8 *fp8 = g_malloc (fp8_bytes);
  void *d_w, *d_bf, *d_fp8;
  int bad = 0;

  fill_raw_weight (dtype, n, k, w, bytes, seed);
  dcp_dequantize_rows (dtype, w, n, k, 0, n, deq);
  d_w = dcpk_test_to_device (w, bytes);
  CHECK_CUDA (dcpk_malloc (&d_bf, (gsize) n * ld * 2));
  CHECK_CUDA (dcpk_malloc (&d_fp8, fp8_bytes));
  CHECK_CUDA (dcpk_memset_async (d_bf, 0x5a, (gsize) n * ld * 2, NULL));
  CHECK_CUDA (dcpk_memset_async (d_fp8, 0x5a, fp8_bytes, NULL));
  CHECK_CUDA (dcpk_gemm_dequant_bf16 (format, d_w, n, k, d_bf, ld, NULL));
  CHECK_CUDA (dcpk_gemm_weight_fp8 (format, d_w, n, k, d_fp8, NULL));
  CHECK_CUDA (dcpk_synchronize ());
  CHECK_CUDA (dcpk_memcpy_d2h (bf, d_bf, (gsize) n * ld * 2));
  CHECK_CUDA (dcpk_memcpy_d2h (fp8, d_fp8, fp8_bytes));

  for (int r = 0; r < n; r++)
    for (int c = 0; c < ld; c++)
      {
        guint16 want = c < k ? dcp_f32_to_bf16 (deq[(gsize) r * k + c]) : 0;
        guint16 got = bf[(gsize) r * ld + c];

        if (got != want && !(isnan (dcp_bf16_to_f32 (got)) && isnan (dcp_bf16_to_f32 (want))))
          {
            if (bad++ < 5)
              g_test_message ("to BF16, format %d n %d k %d: [%d, %d] got 0x%04x want 0x%04x "
                              "(value %g)", format, n, k, r, c, got, want,
                              c < k ? deq[(gsize) r * k + c] : 0.0f);
          }
      }

  for (int tr = 0; tr < tiles_n; tr++)
    for (int tc = 0; tc < l4; tc++)
      {
        float amax = 0, scale, got_scale;

        memcpy (&got_scale, fp8 + scales_at + ((gsize) tr * l4 + tc) * 4, 4);
        if (tc >= l)
          {
            if (got_scale != 0.0f && bad++ < 5)
              g_test_message ("to FP8, format %d n %d k %d: padding scale [%d, %d] is %g", format,
                              n, k, tr, tc, got_scale);
            continue;
          }
        for (int r = tr * 128; r < MIN (tr * 128 + 128, n); r++)
          for (int c = tc * 128; c < MIN (tc * 128 + 128, k); c++)
            if (!isnan (deq[(gsize) r * k + c]))
              amax = MAX (amax, fabsf (deq[(gsize) r * k + c]));
        scale = pow2_scale (amax);
        if (got_scale != scale && bad++ < 5)
          g_test_message ("to FP8, format %d n %d k %d: tile [%d, %d] amax %g scale %g, want %g",
                          format, n, k, tr, tc, amax, got_scale, scale);
        for (int r = tr * 128; r < MIN (tr * 128 + 128, n_pad); r++)
          for (int c = tc * 128; c < MIN (tc * 128 + 128, k_pad); c++)
            {
              float v = r < n && c < k ? deq[(gsize) r * k + c] : 0.0f;
              guint8 want = dcp_f32_to_fp8_e4m3 (v / scale), got = fp8[(gsize) r * k_pad + c];

              if (got != want && bad++ < 5)
                g_test_message ("to FP8, format %d n %d k %d: [%d, %d] value %g scale %g: got "
                                "0x%02x want 0x%02x", format, n, k, r, c, v, scale, got, want);
            }
      }
  g_test_message ("conversions format %d n %d k %d: %d mismatches", format, n, k, bad);
  g_assert_cmpint (bad, ==, 0);
  CHECK_CUDA (dcpk_free (d_fp8));
  CHECK_CUDA (dcpk_free (d_bf));
  CHECK_CUDA (dcpk_free (d_w));
}

static void
test_gemm_conversions (void)
{
  /* k odd, not a multiple of 8, 16, 32 or 128; n not a multiple of 16; several tiles. */
  static const int shapes[][2] = { { 300, 392 }, { 130, 100 }, { 33, 257 }, { 5, 7 },
                                   { 256, 136 }, { 17, 40 }, { 129, 1001 } };

  for (gsize i = 0; i < G_N_ELEMENTS (shapes); i++)
    for (int f = DCPK_FORMAT_BF16; f <= DCPK_FORMAT_MXFP4_E2M1; f++)
      check_conversions ((DcpkFormat) f, shapes[i][0], shapes[i][1], 9000 + i * 16 + f);
}

static void
test_gemm_rejects_bad_arguments (void)
{
  DcpkGemm *gemm = NULL;
  void *d = NULL;
  size_t small = dcpk_gemm_workspace_bytes (DCPK_GEMM_BF16, DCPK_FORMAT_MXFP4_E2M1, 4, 64, 64);

  g_assert_cmpuint (dcpk_gemm_workspace_bytes (DCPK_GEMM_BF16, DCPK_FORMAT_BF16, 0, 4, 4), ==, 0);
  g_assert_cmpuint (dcpk_gemm_workspace_bytes (DCPK_GEMM_BF16, (DcpkFormat) 99, 1, 4, 4), ==, 0);
  g_assert_cmpint (dcpk_gemm_create (16, NULL, &gemm), !=, 0);
  CHECK_CUDA (dcpk_gemm_create (small, NULL, &gemm));
  CHECK_CUDA (dcpk_malloc (&d, 1 << 20));
  g_assert_cmpint (dcpk_gemm (gemm, DCPK_GEMM_BF16, DCPK_FORMAT_BF16, d, 4, 8, d, 0, 0, d, 0), !=, 0);
  g_assert_cmpint (dcpk_gemm (gemm, DCPK_GEMM_BF16, DCPK_FORMAT_BF16, NULL, 4, 8, d, 0, 1, d, 0), !=, 0);
  /* A workspace made for 4 tokens is too small for 4096. */
  g_assert_cmpint (dcpk_gemm (gemm, DCPK_GEMM_BF16, DCPK_FORMAT_MXFP4_E2M1, d, 64, 64, d, 0, 4096,
                              d, 0), !=, 0);
  CHECK_CUDA (dcpk_free (d));
  dcpk_gemm_destroy (gemm);
}

int
main (int argc, char **argv)
{
  gboolean have_gpu;

  g_test_init (&argc, &argv, NULL);
  have_gpu = dcpk_test_have_gpu ();
  if (have_gpu)
    {
      g_test_add_func ("/gpu/gemm/rejects-bad-arguments", test_gemm_rejects_bad_arguments);
      g_test_add_func ("/gpu/gemm/conversions", test_gemm_conversions);
      g_test_add_func ("/gpu/gemm/odd-shapes", test_gemm_odd_shapes);
      g_test_add_func ("/gpu/gemm/27b-shapes", test_gemm_27b_shapes);
    }
  return dcpk_test_run (have_gpu);
}
