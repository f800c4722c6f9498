/* SPDX-License-Identifier: MIT */
/* kernels/attention-prefill.cu against a C reference and against dcpk_attention_decode.
 * A page pool is filled with random keys and values in the layout of dcp-kernels.h (BF16 bit
 * patterns, or MX blocks quantized by engine/model/dcp-quant.c's dcp_quantize), the pages handed
 * out shuffled, and the slots past each sequence's last token poisoned with NaN (BF16 0x7fc0, MX
 * scale 0xff) so that a kernel that lets them into P V fails. Each sequence's chunk is its newest
 * n_q tokens: n_q = kv_len is a whole prompt, n_q < kv_len a chunk after earlier context.
 * ref_attention: FP32 dot products over the values decoded from the pages (dcp_bf16_to_f32,
 * dcp_dequantize_rows), softmax and weighted sum in double, for a subset of query tokens of
 * long chunks (the first and last 5 and every stride-th) so that the CPU side stays a few
 * seconds; every output must be finite.
 * Tolerance: the kernel rounds q to BF16 and the softmax weights to BF16 for the tensor cores
 * (relative 2^-9 each), so a logit of size |s| moves by about |s| 2^-9 and each weight by
 * 2^-9; over random values that averages to a relative error of 2e-3 .. 4e-3 of the output
 * norm and up to 1.2e-2 on a single row (an FP32 emulation of the kernel's rounding over these
 * distributions gave these numbers). The bounds are 1e-2 for the whole output and 4e-2 per row
 * (q in ±3, logits of a few units); the peaked case (q in ±20, logits near 100) has 5e-2 and
 * 0.2, as the logit error grows with the logit. A wrong key, head or mask gives errors of order
 * one on the short rows. Cases with <= 8 queries per sequence also run dcpk_attention_decode
 * (FP32 throughout) and must agree with it within the same bounds.
 * Shapes: the 27B (24 heads, 4 kv heads, head_dim 256), the test checkpoints' (real-heads 2/1/256,
 * odd-sizes 3/1/32), 16/2/128 and 3/1/64; kv lengths 1, 511, 512, 513, 4113; BF16 and MX K/V
 * (8/8, 4/4, 8/4, 6/6, mixed with BF16); several sequences per call; both block shapes (chunks
 * of <= 64 rows per kv head take the small one); the split path (few rows over long contexts). */
#include "config.h"

#include <string.h>

#include "dcp-float16.h"
#include "dcp-quant.h"
#include "dcpk-test.h"

#define PAGE DCPK_KV_PAGE_TOKENS
#define MAX_SEQS 6
#define REF_BUDGET 4e9    /* multiply-adds of the reference per sequence */

typedef struct {
  int n_heads, n_kv, head_dim, n_seqs;
  int kv_len[MAX_SEQS], n_q[MAX_SEQS];
  float q_range;
  double tol, row_tol;
  DcpkFormat k_format, v_format;   /* BF16 when left out */
} Case;

typedef struct {
  const Case *c;
  DcpkKvLayout layout;
  gsize page_bytes, n_pool_pages;
  guint8 *pool;
  gint32 *indptr, *indices, *last_len, *q_indptr;
  int n_rows, max_q_len, max_kv_len;
  float *qg;   /* [rows, n_heads, 2 head_dim] */
} Built;

/* The page layout of dcp-kernels.h written out again: a K block then a V block, each
 * [kv_head][512][head_dim] BF16, or MX element rows [kv_head][512] (head_dim bits / 8 bytes)
 * then E8M0 scales [kv_head][512][head_dim / 32], each block padded to 16 bytes. */
static gsize
elements_bytes (const Built *b, DcpkFormat f)
{
  return (gsize) b->c->n_kv * PAGE * b->c->head_dim * dcpk_test_format_bits (f) / 8;
}

static gsize
block_bytes (const Built *b, DcpkFormat f)
{
  gsize bytes = elements_bytes (b, f);

  if (f != DCPK_FORMAT_BF16)
    bytes += (gsize) b->c->n_kv * PAGE * (b->c->head_dim / 32);
  return (bytes + 15) / 16 * 16;
}

static guint8 *
block_of (const Built *b, int page, gboolean value)
{
  return b->pool + (gsize) page * b->page_bytes + (value ? block_bytes (b, b->c->k_format) : 0);
}

/* All 512 token rows of kv head kvh of a page's K or V block from x [512][head_dim]. */
static void
put_block (const Built *b, int page, int kvh, gboolean value, const float *x)
{
  DcpkFormat f = value ? b->c->v_format : b->c->k_format;
  int hd = b->c->head_dim;
  guint8 *blk = block_of (b, page, value);
  DcpQuantLayout l;
  g_autofree guint8 *tmp = NULL;

  if (f == DCPK_FORMAT_BF16)
    {
      for (gsize i = 0; i < (gsize) PAGE * hd; i++)
        ((guint16 *) blk)[(gsize) kvh * PAGE * hd + i] = dcp_f32_to_bf16 (x[i]);
      return;
    }
  g_assert_true (dcp_quant_layout (dcpk_test_dtype (f), PAGE, hd, &l));
  g_assert_cmpuint (l.row_bytes, ==, (gsize) hd * dcpk_test_format_bits (f) / 8);
  tmp = g_malloc (l.total_bytes);
  dcp_quantize (dcpk_test_dtype (f), x, PAGE, hd, tmp);
  memcpy (blk + (gsize) kvh * PAGE * l.row_bytes, tmp, PAGE * l.row_bytes);
  memcpy (blk + elements_bytes (b, f) + (gsize) kvh * PAGE * (hd / 32), tmp + l.scales_offset,
          (gsize) PAGE * (hd / 32));
}

/* The values of the 512 token rows of kv head kvh of a page's K or V block. */
static void
get_block (const Built *b, int page, int kvh, gboolean value, float *dst)
{
  DcpkFormat f = value ? b->c->v_format : b->c->k_format;
  int hd = b->c->head_dim;
  const guint8 *blk = block_of (b, page, value);
  DcpQuantLayout l;
  g_autofree guint8 *tmp = NULL;

  if (f == DCPK_FORMAT_BF16)
    {
      for (gsize i = 0; i < (gsize) PAGE * hd; i++)
        dst[i] = dcp_bf16_to_f32 (((const guint16 *) blk)[(gsize) kvh * PAGE * hd + i]);
      return;
    }
  g_assert_true (dcp_quant_layout (dcpk_test_dtype (f), PAGE, hd, &l));
  tmp = g_malloc0 (l.total_bytes);
  memcpy (tmp, blk + (gsize) kvh * PAGE * l.row_bytes, PAGE * l.row_bytes);
  memcpy (tmp + l.scales_offset, blk + elements_bytes (b, f) + (gsize) kvh * PAGE * (hd / 32),
          (gsize) PAGE * (hd / 32));
  dcp_dequantize_rows (dcpk_test_dtype (f), tmp, PAGE, hd, 0, PAGE, dst);
}

/* NaN into the token rows slot .. 511 of every kv head of a page (K and V). */
static void
poison_tail (const Built *b, int page, int slot)
{
  int hd = b->c->head_dim;

  for (int value = 0; value < 2; value++)
    {
      DcpkFormat f = value ? b->c->v_format : b->c->k_format;
      guint8 *blk = block_of (b, page, value);
      for (int h = 0; h < b->c->n_kv; h++)
        for (int j = slot; j < PAGE; j++)
          {
            gsize row = (gsize) h * PAGE + j;
            if (f == DCPK_FORMAT_BF16)
              for (int d = 0; d < hd; d++)
                ((guint16 *) blk)[row * hd + d] = 0x7fc0;
            else
              memset (blk + elements_bytes (b, f) + row * (hd / 32), 0xff, hd / 32);
          }
    }
}

static void
build (const Case *c, GRand *rng, Built *b)
{
  int n_pages, hd = c->head_dim;
  g_autofree gint32 *perm = NULL;
  g_autofree float *x = g_new (float, (gsize) PAGE * hd);

  memset (b, 0, sizeof *b);
  b->c = c;
  b->layout = (DcpkKvLayout) { c->n_kv, hd, c->k_format, c->v_format };
  b->page_bytes = dcpk_kv_page_bytes (&b->layout);
  g_assert_cmpuint (b->page_bytes, ==, block_bytes (b, c->k_format) + block_bytes (b, c->v_format));
  b->indptr = g_new (gint32, c->n_seqs + 1);
  b->last_len = g_new (gint32, c->n_seqs);
  b->q_indptr = g_new (gint32, c->n_seqs + 1);
  b->indptr[0] = b->q_indptr[0] = 0;
  for (int s = 0; s < c->n_seqs; s++)
    {
      int pages = (c->kv_len[s] + PAGE - 1) / PAGE;
      g_assert_cmpint (c->n_q[s], >=, 1);
      g_assert_cmpint (c->n_q[s], <=, c->kv_len[s]);
      b->indptr[s + 1] = b->indptr[s] + pages;
      b->last_len[s] = c->kv_len[s] - (pages - 1) * PAGE;
      b->q_indptr[s + 1] = b->q_indptr[s] + c->n_q[s];
      b->max_kv_len = MAX (b->max_kv_len, c->kv_len[s]);
      b->max_q_len = MAX (b->max_q_len, c->n_q[s]);
    }
  n_pages = b->indptr[c->n_seqs];
  b->n_rows = b->q_indptr[c->n_seqs];
  b->n_pool_pages = n_pages + 2;   /* unused pages in between */
  perm = g_new (gint32, b->n_pool_pages);
  for (gsize i = 0; i < b->n_pool_pages; i++)
    perm[i] = (gint32) i;
  for (gsize i = b->n_pool_pages - 1; i > 0; i--)
    {
      gsize j = g_rand_int_range (rng, 0, (gint32) i + 1);
      gint32 tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
  b->indices = g_new (gint32, n_pages);
  memcpy (b->indices, perm, n_pages * sizeof (gint32));
  b->pool = g_malloc0 (b->n_pool_pages * b->page_bytes);

  /* Every block from random values, each token row at its own magnitude 2^-2 .. 2^1. */
  for (gsize page = 0; page < b->n_pool_pages; page++)
    for (int h = 0; h < c->n_kv; h++)
      for (int value = 0; value < 2; value++)
        {
          for (int j = 0; j < PAGE; j++)
            {
              double mag = ldexp (1.0, g_rand_int_range (rng, -2, 2));
              dcpk_test_fill (rng, x + (gsize) j * hd, hd, -mag, mag);
            }
          put_block (b, (int) page, h, value, x);
        }
  for (int s = 0; s < c->n_seqs; s++)
    if (b->last_len[s] < PAGE)
      poison_tail (b, b->indices[b->indptr[s + 1] - 1], b->last_len[s]);

  b->qg = g_new (float, (gsize) b->n_rows * c->n_heads * 2 * hd);
  dcpk_test_fill (rng, b->qg, (gsize) b->n_rows * c->n_heads * 2 * hd, -c->q_range, c->q_range);
}

static void
built_clear (Built *b)
{
  g_free (b->pool);
  g_free (b->indptr);
  g_free (b->indices);
  g_free (b->last_len);
  g_free (b->q_indptr);
  g_free (b->qg);
}

/* Query token t of sequence s is checked against the reference. */
static gboolean
checked (const Built *b, int s, int t)
{
  const Case *c = b->c;
  double work = (double) c->n_q[s] * c->kv_len[s] * c->n_heads * c->head_dim * 2;
  int stride = (int) MAX (1.0, ceil (work / REF_BUDGET)) | 1;

  return t < 5 || t >= c->n_q[s] - 5 || t % stride == 0;
}

/* out [rows, n_heads head_dim] for the checked rows (the others untouched): softmax(q k ·
 * scale) v ⊙ sigmoid(gate), dot products in FP32, the rest in double. */
static void
ref_attention (const Built *b, float scale, float *out)
{
  const Case *c = b->c;
  int hd = c->head_dim, group = c->n_heads / c->n_kv;
  gsize kv_cap = (gsize) (b->max_kv_len + PAGE) * hd;
  g_autofree double *p = g_new (double, b->max_kv_len), *o = g_new (double, hd);
  g_autofree float *kd = g_new (float, kv_cap), *vd = g_new (float, kv_cap);

  for (int s = 0; s < c->n_seqs; s++)
    for (int kvh = 0; kvh < c->n_kv; kvh++)
      {
        for (int pg = b->indptr[s]; pg < b->indptr[s + 1]; pg++)
          {
            gsize at = (gsize) (pg - b->indptr[s]) * PAGE * hd;
            get_block (b, b->indices[pg], kvh, FALSE, kd + at);
            get_block (b, b->indices[pg], kvh, TRUE, vd + at);
          }
        for (int t = 0; t < c->n_q[s]; t++)
          {
            if (!checked (b, s, t))
              continue;
            for (int h = kvh * group; h < (kvh + 1) * group; h++)
              {
                int row = b->q_indptr[s] + t, n_keys = c->kv_len[s] - c->n_q[s] + t + 1;
                const float *q = b->qg + ((gsize) row * c->n_heads + h) * 2 * hd;
                double max = -INFINITY, sum = 0;

                for (int j = 0; j < n_keys; j++)
                  {
                    float dot = 0;
                    for (int d = 0; d < hd; d++)
                      dot += q[d] * kd[(gsize) j * hd + d];
                    p[j] = (double) dot * scale;
                    max = MAX (max, p[j]);
                  }
                memset (o, 0, hd * sizeof (double));
                for (int j = 0; j < n_keys; j++)
                  {
                    p[j] = exp (p[j] - max);
                    sum += p[j];
                    for (int d = 0; d < hd; d++)
                      o[d] += p[j] * vd[(gsize) j * hd + d];
                  }
                for (int d = 0; d < hd; d++)
                  out[((gsize) row * c->n_heads + h) * hd + d]
                      = (float) (o[d] / sum / (1 + exp (-(double) q[hd + d])));
              }
          }
      }
}

/* Compares the checked rows of got with want: the relative error over all of them and the
 * worst row's; every value of got must be finite. */
static void
compare (const Built *b, const float *got, const float *want, const char *what)
{
  const Case *c = b->c;
  int hd = c->head_dim, worst_row = -1;
  double err = 0, norm = 0, worst = 0, total;

  for (gsize i = 0; i < (gsize) b->n_rows * c->n_heads * hd; i++)
    if (!isfinite (got[i]))
      {
        g_test_message ("%s: output %" G_GSIZE_FORMAT " (row %d, head %d, dim %d) is %g", what,
                        i, (int) (i / hd / c->n_heads), (int) (i / hd % c->n_heads),
                        (int) (i % hd), got[i]);
        g_assert_true (isfinite (got[i]));
      }
  for (int s = 0; s < c->n_seqs; s++)
    for (int t = 0; t < c->n_q[s]; t++)
      {
        if (!checked (b, s, t))
          continue;
        for (int h = 0; h < c->n_heads; h++)
          {
            gsize at = ((gsize) (b->q_indptr[s] + t) * c->n_heads + h) * hd;
            double e = 0, n = 0;
            for (int d = 0; d < hd; d++)
              {
                e += ((double) got[at + d] - want[at + d]) * ((double) got[at + d] - want[at + d]);
                n += (double) want[at + d] * want[at + d];
              }
            err += e;
            norm += n;
            if (n > 0 && sqrt (e / n) > worst)
              {
                worst = sqrt (e / n);
                worst_row = (b->q_indptr[s] + t) * c->n_heads + h;
              }
          }
      }
  g_assert_cmpfloat (norm, >, 0);
  total = sqrt (err / norm);
  g_test_message ("%s: heads %d/%d head_dim %d formats %d/%d seqs %d rows %d max q %d max kv %d: "
                  "rel err %.3g (bound %.3g), worst row %d (token row %d, head %d) %.3g (bound %.3g)",
                  what, c->n_heads, c->n_kv, hd, c->k_format, c->v_format, c->n_seqs, b->n_rows,
                  b->max_q_len, b->max_kv_len, total, c->tol, worst_row, worst_row / c->n_heads,
                  worst_row % c->n_heads, worst, c->row_tol);
  g_assert_cmpfloat (total, <=, c->tol);
  g_assert_cmpfloat (worst, <=, c->row_tol);
}

static void
check_case (const Case *c, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  Built b;
  gsize n_out, ws_bytes;
  float scale;
  g_autofree float *want = NULL, *got = NULL, *dec = NULL;
  void *d_pool, *d_indptr, *d_indices, *d_last, *d_qind, *d_qg, *d_out, *d_ws;

  build (c, rng, &b);
  scale = 1.0f / sqrtf ((float) c->head_dim);
  n_out = (gsize) b.n_rows * c->n_heads * c->head_dim;
  want = g_new0 (float, n_out);
  got = g_new (float, n_out);
  ref_attention (&b, scale, want);

  d_pool = dcpk_test_to_device (b.pool, b.n_pool_pages * b.page_bytes);
  d_indptr = dcpk_test_to_device (b.indptr, (c->n_seqs + 1) * sizeof (gint32));
  d_indices = dcpk_test_to_device (b.indices, b.indptr[c->n_seqs] * sizeof (gint32));
  d_last = dcpk_test_to_device (b.last_len, c->n_seqs * sizeof (gint32));
  d_qind = dcpk_test_to_device (b.q_indptr, (c->n_seqs + 1) * sizeof (gint32));
  d_qg = dcpk_test_to_device (b.qg, (gsize) b.n_rows * c->n_heads * 2 * c->head_dim * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_out, n_out * sizeof (float)));
  /* NaN first: every row must be written */
  CHECK_CUDA (dcpk_memset_async (d_out, 0xff, n_out * sizeof (float), NULL));
  ws_bytes = dcpk_attention_prefill_workspace_bytes (&b.layout, c->n_heads, c->n_seqs, b.n_rows,
                                                     b.max_q_len, b.max_kv_len);
  g_assert_cmpuint (ws_bytes, >, 0);
  CHECK_CUDA (dcpk_malloc (&d_ws, ws_bytes));
  CHECK_CUDA (dcpk_attention_prefill (&b.layout, c->n_heads, scale, d_pool, d_indptr, d_indices,
                                      d_last, c->n_seqs, d_qind, b.n_rows, b.max_q_len,
                                      b.max_kv_len, d_qg, d_out, d_ws, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_out, n_out * sizeof (float)));
  compare (&b, got, want, "prefill vs reference");

  if (b.max_q_len <= DCPK_ATTN_MAX_QUERIES && c->head_dim >= 64
      && (c->head_dim == 256 || (c->k_format == DCPK_FORMAT_BF16 && c->v_format == DCPK_FORMAT_BF16)))
    {
      void *d_dws;
      gsize dws = dcpk_attention_workspace_bytes (&b.layout, c->n_heads, b.n_rows, b.max_kv_len);

      dec = g_new (float, n_out);
      CHECK_CUDA (dcpk_malloc (&d_dws, dws));
      CHECK_CUDA (dcpk_attention_decode (&b.layout, c->n_heads, scale, d_pool, d_indptr, d_indices,
                                         d_last, c->n_seqs, d_qind, b.n_rows, b.max_kv_len, d_qg,
                                         d_out, d_dws, NULL));
      CHECK_CUDA (dcpk_memcpy_d2h (dec, d_out, n_out * sizeof (float)));
      compare (&b, dec, want, "decode vs reference");
      for (int s = 0; s < c->n_seqs; s++)   /* every row is checked: compare all of them */
        for (int t = 0; t < c->n_q[s]; t++)
          g_assert_true (checked (&b, s, t));
      compare (&b, got, dec, "prefill vs decode");
      CHECK_CUDA (dcpk_free (d_dws));
    }

  CHECK_CUDA (dcpk_free (d_pool));
  CHECK_CUDA (dcpk_free (d_indptr));
  CHECK_CUDA (dcpk_free (d_indices));
  CHECK_CUDA (dcpk_free (d_last));
  CHECK_CUDA (dcpk_free (d_qind));
  CHECK_CUDA (dcpk_free (d_qg));
  CHECK_CUDA (dcpk_free (d_out));
  CHECK_CUDA (dcpk_free (d_ws));
  built_clear (&b);
}

#define BOUNDS 1e-2, 4e-2  /* bounds for q in ±3 (see the top of the file) */
#define MX8 DCPK_FORMAT_MXFP8_E4M3
#define MX6 DCPK_FORMAT_MXFP6_E2M3
#define MX6B DCPK_FORMAT_MXFP6_E3M2
#define MX4 DCPK_FORMAT_MXFP4_E2M1
#define BF DCPK_FORMAT_BF16

static const Case cases[] = {
  /* the 27B: whole prompts across the page edges, then chunks after earlier context */
  { 24, 4, 256, 5, { 1, 511, 512, 513, 4113 }, { 1, 511, 512, 513, 4113 }, 3, BOUNDS },
  { 24, 4, 256, 4, { 600, 1537, 4113, 2000 }, { 77, 1024, 300, 1 }, 3, BOUNDS },
  /* the test checkpoints: real-heads 2/1/256, odd-sizes 3/1/32 */
  { 2, 1, 256, 3, { 513, 4113, 64 }, { 513, 2000, 1 }, 3, BOUNDS },
  { 3, 1, 32, 3, { 700, 65, 4113 }, { 100, 65, 700 }, 3, BOUNDS },
  /* other head sizes and groups */
  { 16, 2, 128, 3, { 1, 1030, 777 }, { 1, 500, 777 }, 3, BOUNDS },
  { 3, 1, 64, 3, { 9, 1300, 512 }, { 9, 64, 130 }, 3, BOUNDS },
  /* peaked softmax: logits near 100 */
  { 24, 4, 256, 1, { 3000 }, { 200 }, 20, 5e-2, 0.2 },
  /* MX K and V */
  { 24, 4, 256, 2, { 513, 1100 }, { 513, 200 }, 3, BOUNDS, MX8, MX8 },
  { 24, 4, 256, 2, { 1537, 70 }, { 400, 70 }, 3, BOUNDS, MX4, MX4 },
  { 24, 4, 256, 2, { 4113, 511 }, { 129, 511 }, 3, BOUNDS, MX8, MX4 },
  { 24, 4, 256, 2, { 900, 512 }, { 300, 33 }, 3, BOUNDS, MX6, MX6B },
  { 16, 2, 128, 2, { 1025, 300 }, { 250, 300 }, 3, BOUNDS, MX8, BF },
  { 3, 1, 64, 2, { 2000, 17 }, { 600, 17 }, 3, BOUNDS, BF, MX4 },
  /* chunks of <= 64 rows per kv head: the small block shape (64 rows x 32 keys) */
  { 3, 1, 32, 2, { 700, 40 }, { 21, 5 }, 3, BOUNDS, MX6, BF },
  { 2, 1, 256, 2, { 1025, 31 }, { 32, 31 }, 3, BOUNDS, MX4, MX8 },
  /* few rows over long contexts: the split over the keys, the small block shape, and
   * agreement with decode */
  { 24, 4, 256, 4, { 1, 513, 20000, 777 }, { 1, 8, 8, 3 }, 3, BOUNDS },
  { 16, 2, 128, 3, { 9000, 64, 2 }, { 5, 8, 2 }, 3, BOUNDS },
  { 24, 4, 256, 2, { 9000, 1500 }, { 8, 4 }, 3, BOUNDS, MX8, MX4 },
  { 24, 4, 256, 2, { 9000, 3000 }, { 100, 40 }, 3, BOUNDS },
};

static void
test_attention_prefill (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    check_case (&cases[i], 900 + i);
}

static void
test_rejects (void)
{
  DcpkKvLayout bad = { 4, 96, BF, BF };
  DcpkKvLayout ok = { 4, 256, BF, BF };
  gint32 *p = (gint32 *) 16;
  float *f = (float *) 16;

  g_assert_cmpuint (dcpk_attention_prefill_workspace_bytes (&bad, 24, 1, 10, 10, 10), ==, 0);
  g_assert_cmpuint (dcpk_attention_prefill_workspace_bytes (&ok, 22, 1, 10, 10, 10), ==, 0);
  g_assert_cmpint (dcpk_attention_prefill (&bad, 24, 0.0625f, p, p, p, p, 1, p, 10, 10, 10, f, f,
                                           f, NULL), !=, 0);
  g_assert_cmpint (dcpk_attention_prefill (&ok, 22, 0.0625f, p, p, p, p, 1, p, 10, 10, 10, f, f,
                                           f, NULL), !=, 0);   /* 22 heads over 4 kv heads */
  g_assert_cmpint (dcpk_attention_prefill (&ok, 24, 0.0625f, p, p, p, p, 1, NULL, 10, 10, 10, f,
                                           f, f, NULL), !=, 0);   /* no q_indptr */
  g_assert_cmpint (dcpk_attention_prefill (&ok, 24, 0.0625f, p, p, p, p, 1, p, -1, 10, 10, f, f,
                                           f, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    {
      g_test_add_func ("/gpu/attention-prefill/shapes", test_attention_prefill);
      g_test_add_func ("/gpu/attention-prefill/rejects", test_rejects);
    }
  return dcpk_test_run (gpu);
}
