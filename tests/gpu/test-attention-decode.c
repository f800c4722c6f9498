/* SPDX-License-Identifier: MIT */
/* kernels/kv-append.cu and kernels/attention-decode.cu against C references.
 * The page pool is filled with random keys and values in the page layout of dcp-kernels.h
 * (BF16 bit patterns; MX rows quantized by engine/model/dcp-quant.c's dcp_quantize), pages handed
 * out in a shuffled order so that no sequence's pages are contiguous. Then each sequence's newest
 * tokens (its query tokens) are appended from random FP32 k and v (with an all-zero block and an
 * outlier), by dcpk_kv_append on the GPU and by ref_append here (BF16 round to nearest even, MX
 * through dcp_quantize), plus one token at slot -1 that must be skipped: the pools must agree
 * bit for bit. Then dcpk_attention_decode is compared with ref_attention (double, over the
 * values decoded from the pages by dcp_bf16_to_f32 / dcp_dequantize_rows); it passes when
 * ||gpu - ref|| / ||ref|| <= 1e-4 (FP32 online softmax over up to 128K keys). Shapes: the 27B
 * (24 heads, 4 kv heads, head_dim 256) with lengths around the page edges, draft verification
 * with 1..8 query tokens per sequence, 40K and 128K tokens (many splits), batch 1 and batches
 * of 12 and 16 at short contexts (1 to 3000 keys: chunks of 32 keys, splits with no keys),
 * head_dim 128 and 64 with other group sizes, large logits, and K / V in MXFP8, MXFP6 (E2M3,
 * E3M2), MXFP4 and mixed with BF16. Each case runs with max_kv_len its longest sequence and
 * with the decode step's power-of-two bucket, each call with a guard block after its
 * workspace_bytes that must come back untouched; the workspace size is checked to grow with
 * rows and max_kv_len (the step sizes it once for its largest batch and bucket).
 * ref_attention itself is checked on the CPU (no GPU needed) against a dense re-statement of
 * the CPU backend's attention loop (engine/backend/dcp-cpu-attention.c, with dcp_cpu_dot,
 * dcp_cpu_axpy, dcp_cpu_sigmoid) over contiguous copies of the keys and values. */
#include "config.h"

#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcp-float16.h"
#include "dcp-quant.h"
#include "dcpk-test.h"

#define PAGE DCPK_KV_PAGE_TOKENS
#define TOLERANCE 1e-4
#define MAX_SEQS 16
#define GUARD_BYTES 4096

typedef struct {
  int n_heads, n_kv, head_dim, n_seqs;
  int kv_len[MAX_SEQS], n_q[MAX_SEQS];
  float q_range;
  DcpkFormat k_format, v_format;   /* BF16 when left out */
} Case;

/* A built case: host pool, page tables, queries. */
typedef struct {
  const Case *c;
  DcpkKvLayout layout;
  gsize page_bytes, n_pool_pages;
  guint8 *pool;
  gint32 *indptr, *indices, *last_len, *q_indptr;
  int n_rows, max_kv_len;
  float *qg;   /* [rows, n_heads, 2 head_dim] */
} Built;

/* The page layout written out again from dcp-kernels.h / docs/KERNELS.md: a K block then a V
 * block, each [kv_head][512][head_dim] BF16, or for MX the element rows [kv_head][512]
 * (head_dim bits / 8 bytes) then the E8M0 scales [kv_head][512][head_dim / 32], each block
 * padded to 16 bytes. */
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

/* Stores head_dim values as the token-head row (page, slot, kv head) of K or V; MX through
 * the C reference dcp_quantize. */
static void
put_row (const Built *b, int page, int slot, int kvh, gboolean value, const float *x)
{
  DcpkFormat f = value ? b->c->v_format : b->c->k_format;
  int hd = b->c->head_dim;
  gsize row = (gsize) kvh * PAGE + slot;
  guint8 *blk = block_of (b, page, value);
  DcpQuantLayout l;
  g_autofree guint8 *tmp = NULL;

  if (f == DCPK_FORMAT_BF16)
    {
      for (int d = 0; d < hd; d++)
        ((guint16 *) blk)[row * hd + d] = dcp_f32_to_bf16 (x[d]);
      return;
    }
  g_assert_true (dcp_quant_layout (dcpk_test_dtype (f), 1, hd, &l));
  g_assert_cmpuint (l.row_bytes, ==, (gsize) hd * dcpk_test_format_bits (f) / 8);
  tmp = g_malloc (l.total_bytes);
  dcp_quantize (dcpk_test_dtype (f), x, 1, hd, tmp);
  memcpy (blk + row * l.row_bytes, tmp, l.row_bytes);
  memcpy (blk + elements_bytes (b, f) + row * (hd / 32), tmp + l.scales_offset, hd / 32);
}

/* The values of a token-head row; MX through dcp_dequantize_rows. */
static void
get_row (const Built *b, int page, int slot, int kvh, gboolean value, float *dst)
{
  DcpkFormat f = value ? b->c->v_format : b->c->k_format;
  int hd = b->c->head_dim;
  gsize row = (gsize) kvh * PAGE + slot;
  const guint8 *blk = block_of (b, page, value);
  DcpQuantLayout l;
  g_autofree guint8 *tmp = NULL;

  if (f == DCPK_FORMAT_BF16)
    {
      for (int d = 0; d < hd; d++)
        dst[d] = dcp_bf16_to_f32 (((const guint16 *) blk)[row * hd + d]);
      return;
    }
  g_assert_true (dcp_quant_layout (dcpk_test_dtype (f), 1, hd, &l));
  tmp = g_malloc0 (l.total_bytes);
  memcpy (tmp, blk + row * l.row_bytes, l.row_bytes);
  memcpy (tmp + l.scales_offset, blk + elements_bytes (b, f) + row * (hd / 32), hd / 32);
  dcp_dequantize_rows (dcpk_test_dtype (f), tmp, 1, hd, 0, 1, dst);
}

/* K and V of kv head kvh of sequence s, keys 0 .. kv_len - 1, as FP32 [kv_len, head_dim]. */
static void
gather (const Built *b, int s, int kvh, float *k, float *v)
{
  int hd = b->c->head_dim;

  for (int j = 0; j < b->c->kv_len[s]; j++)
    {
      int page = b->indices[b->indptr[s] + j / PAGE];
      get_row (b, page, j % PAGE, kvh, FALSE, k + (gsize) j * hd);
      get_row (b, page, j % PAGE, kvh, TRUE, v + (gsize) j * hd);
    }
}

static void
ref_append (const Built *b, const float *k, const float *v, const gint32 *slots, int n_tokens)
{
  const Case *c = b->c;
  int width = c->n_kv * c->head_dim;

  for (int t = 0; t < n_tokens; t++)
    if (slots[t] >= 0)
      for (int h = 0; h < c->n_kv; h++)
        {
          put_row (b, slots[t] / PAGE, slots[t] % PAGE, h, FALSE, k + (gsize) t * width + h * c->head_dim);
          put_row (b, slots[t] / PAGE, slots[t] % PAGE, h, TRUE, v + (gsize) t * width + h * c->head_dim);
        }
}

/* out [rows, n_heads head_dim]: softmax(q k · scale) v ⊙ sigmoid(gate), in double. */
static void
ref_attention (const Built *b, float scale, float *out)
{
  const Case *c = b->c;
  int hd = c->head_dim, group = c->n_heads / c->n_kv;
  g_autofree double *p = g_new (double, b->max_kv_len), *o = g_new (double, hd);
  g_autofree float *kd = g_new (float, (gsize) b->max_kv_len * hd);
  g_autofree float *vd = g_new (float, (gsize) b->max_kv_len * hd);

  for (int s = 0; s < c->n_seqs; s++)
    for (int kvh = 0; kvh < c->n_kv; kvh++)
      {
        gather (b, s, kvh, kd, vd);
        for (int t = 0; t < c->n_q[s]; t++)
          for (int h = kvh * group; h < (kvh + 1) * group; h++)
            {
              int row = b->q_indptr[s] + t, n_keys = c->kv_len[s] - c->n_q[s] + t + 1;
              const float *q = b->qg + ((gsize) row * c->n_heads + h) * 2 * hd;
              double max = -INFINITY, sum = 0;

              for (int j = 0; j < n_keys; j++)
                {
                  double dot = 0;
                  for (int d = 0; d < hd; d++)
                    dot += (double) q[d] * kd[(gsize) j * hd + d];
                  p[j] = dot * scale;
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

/* The CPU backend's loop (attend_range) over contiguous FP32 copies of the cache. */
static void
dense_attention (const Built *b, float scale, float *out)
{
  const Case *c = b->c;
  int hd = c->head_dim, group = c->n_heads / c->n_kv, width = c->n_kv * hd;
  g_autofree float *scores = g_new (float, b->max_kv_len);
  g_autofree float *kc = g_new (float, (gsize) b->max_kv_len * width);
  g_autofree float *vc = g_new (float, (gsize) b->max_kv_len * width);

  for (int s = 0; s < c->n_seqs; s++)
    {
      for (int j = 0; j < c->kv_len[s]; j++)
        for (int h = 0; h < c->n_kv; h++)
          {
            int page = b->indices[b->indptr[s] + j / PAGE];
            get_row (b, page, j % PAGE, h, FALSE, kc + (gsize) j * width + h * hd);
            get_row (b, page, j % PAGE, h, TRUE, vc + (gsize) j * width + h * hd);
          }
      for (int t = 0; t < c->n_q[s]; t++)
        for (int head = 0; head < c->n_heads; head++)
          {
            int row = b->q_indptr[s] + t, kv = head / group;
            guint n_keys = c->kv_len[s] - c->n_q[s] + t + 1;
            const float *q = b->qg + ((gsize) row * c->n_heads + head) * 2 * hd, *gate = q + hd;
            float *o = out + ((gsize) row * c->n_heads + head) * hd;
            float max = -INFINITY, sum = 0;

            for (guint j = 0; j < n_keys; j++)
              {
                scores[j] = dcp_cpu_dot (q, kc + (gsize) j * width + kv * hd, hd) * scale;
                max = MAX (max, scores[j]);
              }
            for (guint j = 0; j < n_keys; j++)
              {
                scores[j] = expf (scores[j] - max);
                sum += scores[j];
              }
            memset (o, 0, hd * sizeof (float));
            for (guint j = 0; j < n_keys; j++)
              dcp_cpu_axpy (o, scores[j] / sum, vc + (gsize) j * width + kv * hd, hd);
            for (int d = 0; d < hd; d++)
              o[d] *= dcp_cpu_sigmoid (gate[d]);
          }
    }
}

static void
build (const Case *c, GRand *rng, Built *b)
{
  int n_pages = 0, hd = c->head_dim;
  g_autofree gint32 *perm = NULL;

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
      g_assert_cmpint (c->n_q[s], <=, c->kv_len[s]);
      b->indptr[s + 1] = b->indptr[s] + pages;
      b->last_len[s] = c->kv_len[s] - (pages - 1) * PAGE;
      b->q_indptr[s + 1] = b->q_indptr[s] + c->n_q[s];
      b->max_kv_len = MAX (b->max_kv_len, c->kv_len[s]);
    }
  n_pages = b->indptr[c->n_seqs];
  b->n_rows = b->q_indptr[c->n_seqs];
  b->n_pool_pages = n_pages + 3;   /* unused pages in between */
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
  if (c->k_format == DCPK_FORMAT_BF16 && c->v_format == DCPK_FORMAT_BF16)
    for (gsize i = 0; i < b->n_pool_pages * b->page_bytes / 4; i++)
      {
        /* two BF16 values in ±2 per random word: sign, exponent 126..128, random mantissa */
        guint32 r = g_rand_int (rng);
        guint32 lo = (r & 0x807f) | ((126 + (r >> 7) % 3) << 7);
        guint32 hi = ((r >> 16) & 0x807f) | ((126 + (r >> 23) % 3) << 7);
        ((guint32 *) b->pool)[i] = lo | (hi << 16);
      }
  else
    {
      /* every row of every page from random values (rows at different magnitudes) */
      g_autofree float *x = g_new (float, hd);
      for (gsize page = 0; page < b->n_pool_pages; page++)
        for (int h = 0; h < c->n_kv; h++)
          for (int slot = 0; slot < PAGE; slot++)
            for (int value = 0; value < 2; value++)
              {
                double mag = ldexp (1.0, g_rand_int_range (rng, -3, 2));
                dcpk_test_fill (rng, x, hd, -mag, mag);
                put_row (b, (int) page, slot, h, value, x);
              }
    }
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

static void
check_case (const Case *c, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  Built b;
  int width, n_app;
  gsize n_out, pool_bytes, ws_bytes;
  int bucket;
  float scale;
  guint8 guard[GUARD_BYTES], guard_back[GUARD_BYTES];
  g_autofree float *k = NULL, *v = NULL, *want = NULL, *got = NULL;
  g_autofree gint32 *slots = NULL;
  g_autofree guint8 *pool_gpu = NULL;
  void *d_pool, *d_k, *d_v, *d_slots, *d_indptr, *d_indices, *d_last, *d_qind, *d_qg, *d_out, *d_ws;
  double e;

  build (c, rng, &b);
  width = c->n_kv * c->head_dim;
  scale = 1.0f / sqrtf ((float) c->head_dim);
  pool_bytes = b.n_pool_pages * b.page_bytes;
  d_pool = dcpk_test_to_device (b.pool, pool_bytes);

  /* Append each sequence's query tokens, and one token to skip. */
  n_app = b.n_rows + 1;
  k = g_new (float, (gsize) n_app * width);
  v = g_new (float, (gsize) n_app * width);
  slots = g_new (gint32, n_app);
  dcpk_test_fill (rng, k, (gsize) n_app * width, -2, 2);
  dcpk_test_fill (rng, v, (gsize) n_app * width, -2, 2);
  for (int d = 0; d < 32; d++)
    k[d] = 0;               /* an all-zero block: E8M0 code 0, zero codes */
  v[width + 5] = 3000;      /* an outlier: the rest of its block lands on subnormal codes */
  for (int s = 0, t = 0; s < c->n_seqs; s++)
    for (int j = 0; j < c->n_q[s]; j++, t++)
      {
        int pos = c->kv_len[s] - c->n_q[s] + j;
        slots[t] = b.indices[b.indptr[s] + pos / PAGE] * PAGE + pos % PAGE;
      }
  slots[n_app - 1] = -1;
  d_k = dcpk_test_to_device (k, (gsize) n_app * width * sizeof (float));
  d_v = dcpk_test_to_device (v, (gsize) n_app * width * sizeof (float));
  d_slots = dcpk_test_to_device (slots, n_app * sizeof (gint32));
  CHECK_CUDA (dcpk_kv_append (&b.layout, d_pool, d_k, d_v, d_slots, n_app, NULL));
  ref_append (&b, k, v, slots, n_app);
  pool_gpu = g_malloc (pool_bytes);
  CHECK_CUDA (dcpk_memcpy_d2h (pool_gpu, d_pool, pool_bytes));
  for (gsize i = 0; i < pool_bytes; i++)
    if (pool_gpu[i] != b.pool[i])
      {
        gsize in_page = i % b.page_bytes, kb = block_bytes (&b, c->k_format);
        g_test_message ("pools differ first at byte %" G_GSIZE_FORMAT " (page %" G_GSIZE_FORMAT
                        ", %s block, byte %" G_GSIZE_FORMAT "): gpu 0x%02x, ref 0x%02x", i,
                        i / b.page_bytes, in_page < kb ? "K" : "V",
                        in_page < kb ? in_page : in_page - kb, pool_gpu[i], b.pool[i]);
        g_assert_cmpuint (pool_gpu[i], ==, b.pool[i]);
      }

  /* Attention. */
  n_out = (gsize) b.n_rows * c->n_heads * c->head_dim;
  want = g_new (float, n_out);
  got = g_new (float, n_out);
  ref_attention (&b, scale, want);
  d_indptr = dcpk_test_to_device (b.indptr, (c->n_seqs + 1) * sizeof (gint32));
  d_indices = dcpk_test_to_device (b.indices, b.indptr[c->n_seqs] * sizeof (gint32));
  d_last = dcpk_test_to_device (b.last_len, c->n_seqs * sizeof (gint32));
  d_qind = dcpk_test_to_device (b.q_indptr, (c->n_seqs + 1) * sizeof (gint32));
  d_qg = dcpk_test_to_device (b.qg, (gsize) b.n_rows * c->n_heads * 2 * c->head_dim * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_out, n_out * sizeof (float)));
  /* The workspace for the largest call (a graph's kv bucket), with a guard block after each
   * call's own workspace_bytes that the kernels must leave alone. */
  bucket = 512;
  while (bucket < b.max_kv_len)
    bucket *= 2;
  ws_bytes = dcpk_attention_workspace_bytes (&b.layout, c->n_heads, b.n_rows, bucket);
  g_assert_cmpuint (ws_bytes, >=, dcpk_attention_workspace_bytes (&b.layout, c->n_heads, b.n_rows,
                                                                  b.max_kv_len));
  CHECK_CUDA (dcpk_malloc (&d_ws, ws_bytes + GUARD_BYTES));
  memset (guard, 0xa5, GUARD_BYTES);
  for (int pass = 0; pass < 3; pass++)
    {
      /* pass 1: one query per sequence without q_indptr, when the case has one each;
       * pass 2: max_kv_len the decode step's bucket (more splits than keys, empty ones) */
      gboolean one_each = TRUE;
      int max_kv = pass == 2 ? bucket : b.max_kv_len;
      gsize used = dcpk_attention_workspace_bytes (&b.layout, c->n_heads, b.n_rows, max_kv);
      for (int s = 0; s < c->n_seqs; s++)
        one_each = one_each && c->n_q[s] == 1;
      if (pass == 1 && !one_each)
        continue;
      g_assert_cmpuint (used, >, 0);
      /* NaN in the output and the workspace: nothing left over from the last pass counts */
      CHECK_CUDA (dcpk_memset_async (d_out, 0xff, n_out * sizeof (float), NULL));
      CHECK_CUDA (dcpk_memset_async (d_ws, 0xff, used, NULL));
      CHECK_CUDA (dcpk_memcpy_h2d ((char *) d_ws + used, guard, GUARD_BYTES));
      CHECK_CUDA (dcpk_attention_decode (&b.layout, c->n_heads, scale, d_pool, d_indptr, d_indices,
                                         d_last, c->n_seqs, pass == 1 ? NULL : d_qind, b.n_rows,
                                         max_kv, d_qg, d_out, d_ws, NULL));
      CHECK_CUDA (dcpk_memcpy_d2h (got, d_out, n_out * sizeof (float)));
      CHECK_CUDA (dcpk_memcpy_d2h (guard_back, (char *) d_ws + used, GUARD_BYTES));
      e = dcpk_test_rel_err (got, want, n_out);
      g_test_message ("heads %d/%d head_dim %d K/V formats %d/%d seqs %d max kv %d rows %d%s: "
                      "rel err %.3g", c->n_heads, c->n_kv, c->head_dim, c->k_format, c->v_format,
                      c->n_seqs, max_kv, b.n_rows,
                      pass == 1 ? " (no q_indptr)" : pass == 2 ? " (bucket)" : "", e);
      g_assert_cmpint (memcmp (guard, guard_back, GUARD_BYTES), ==, 0);
      g_assert_cmpfloat (e, <=, TOLERANCE);
    }

  CHECK_CUDA (dcpk_free (d_pool));
  CHECK_CUDA (dcpk_free (d_k));
  CHECK_CUDA (dcpk_free (d_v));
  CHECK_CUDA (dcpk_free (d_slots));
  CHECK_CUDA (dcpk_free (d_indptr));
  CHECK_CUDA (dcpk_free (d_indices));
  CHECK_CUDA (dcpk_free (d_last));
  CHECK_CUDA (dcpk_free (d_qind));
  CHECK_CUDA (dcpk_free (d_qg));
  CHECK_CUDA (dcpk_free (d_out));
  CHECK_CUDA (dcpk_free (d_ws));
  built_clear (&b);
}

static const Case cases[] = {
  { 24, 4, 256, 5, { 1, 511, 512, 513, 3000 }, { 1, 1, 1, 1, 1 }, 3 },
  { 24, 4, 256, 3, { 8, 700, 1537 }, { 8, 3, 1 }, 3 },              /* draft verification */
  { 24, 4, 256, 2, { 131072, 40000 }, { 1, 2 }, 3 },                /* long contexts */
  { 16, 2, 128, 4, { 9, 1024, 77, 2049 }, { 2, 8, 5, 1 }, 3 },
  { 3, 1, 64, 3, { 300, 8, 1300 }, { 8, 8, 4 }, 3 },                 /* 3 row groups */
  { 24, 4, 256, 2, { 5000, 20 }, { 1, 1 }, 60 },                     /* peaked softmax */
  /* batch 1 and short contexts: few keys over many splits */
  { 24, 4, 256, 1, { 1 }, { 1 }, 3 },
  { 24, 4, 256, 1, { 37 }, { 1 }, 3 },
  { 24, 4, 256, 1, { 1024 }, { 1 }, 3 },
  { 24, 4, 256, 1, { 1025 }, { 1 }, 3 },
  { 24, 4, 256, 1, { 300 }, { 6 }, 3 },
  { 16, 2, 128, 1, { 50 }, { 1 }, 3 },
  { 8, 8, 64, 1, { 200 }, { 1 }, 3 },                                /* group 1 */
  { 24, 4, 256, 12, { 1, 2, 17, 31, 32, 33, 64, 100, 500, 511, 1024, 1030 },
    { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, 3 },
  { 24, 4, 256, 16, { 3, 16, 47, 48, 49, 95, 200, 512, 513, 777, 1000, 1024, 1500, 2047, 2048, 3000 },
    { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, 3 },
  { 24, 4, 256, 16, { 8, 9, 20, 70, 100, 130, 260, 300, 513, 600, 700, 900, 1000, 1100, 1200, 1300 },
    { 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7 }, 3 },       /* 16 drafts, 72 rows */
  /* MX K and V */
  { 24, 4, 256, 3, { 700, 1537, 9 }, { 1, 3, 8 }, 3, DCPK_FORMAT_MXFP8_E4M3, DCPK_FORMAT_MXFP8_E4M3 },
  { 24, 4, 256, 2, { 1100, 513 }, { 2, 1 }, 3, DCPK_FORMAT_MXFP6_E2M3, DCPK_FORMAT_MXFP4_E2M1 },
  { 24, 4, 256, 2, { 40000, 600 }, { 1, 1 }, 3, DCPK_FORMAT_MXFP4_E2M1, DCPK_FORMAT_MXFP6_E3M2 },
  { 24, 4, 256, 2, { 800, 1 }, { 4, 1 }, 3, DCPK_FORMAT_BF16, DCPK_FORMAT_MXFP8_E4M3 },
  { 24, 4, 256, 1, { 2000 }, { 1 }, 3, DCPK_FORMAT_MXFP6_E3M2, DCPK_FORMAT_BF16 },
  { 24, 4, 256, 1, { 45 }, { 1 }, 3, DCPK_FORMAT_MXFP4_E2M1, DCPK_FORMAT_MXFP8_E4M3 },
  { 24, 4, 256, 1, { 1024 }, { 1 }, 3, DCPK_FORMAT_MXFP8_E4M3, DCPK_FORMAT_MXFP6_E2M3 },
  { 24, 4, 256, 12, { 1, 7, 33, 64, 65, 200, 513, 700, 1000, 1024, 1500, 2000 },
    { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, 3, DCPK_FORMAT_MXFP6_E3M2, DCPK_FORMAT_MXFP4_E2M1 },
};

static void
test_attention_decode (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    check_case (&cases[i], 300 + i);
}

static void
test_rejects (void)
{
  DcpkKvLayout bad = { 4, 96, DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 };
  DcpkKvLayout mx128 = { 4, 128, DCPK_FORMAT_MXFP8_E4M3, DCPK_FORMAT_BF16 };
  DcpkKvLayout ok = { 4, 256, DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 };
  gint32 *p = (gint32 *) 16;
  float *f = (float *) 16;

  g_assert_cmpint (dcpk_attention_decode (&bad, 24, 0.0625f, p, p, p, p, 1, NULL, 1, 10, f, f, f,
                                          NULL), !=, 0);
  g_assert_cmpint (dcpk_attention_decode (&ok, 22, 0.0625f, p, p, p, p, 1, NULL, 1, 10, f, f, f,
                                          NULL), !=, 0);   /* 22 heads over 4 kv heads */
  g_assert_cmpint (dcpk_attention_decode (&ok, 24, 0.0625f, p, p, p, p, 2, NULL, 1, 10, f, f, f,
                                          NULL), !=, 0);   /* rows != seqs without q_indptr */
  g_assert_cmpint (dcpk_attention_decode (&mx128, 24, 0.0625f, p, p, p, p, 1, NULL, 1, 10, f, f,
                                          f, NULL), !=, 0);   /* MX needs head_dim 256 */
  bad.head_dim = 48;
  g_assert_cmpuint (dcpk_kv_page_bytes (&bad), ==, 0);
  g_assert_cmpint (dcpk_kv_append (&bad, p, f, f, p, 1, NULL), !=, 0);
}

/* No device needed: a workspace sized for more rows or a longer max_kv_len is never smaller. */
static void
test_workspace (void)
{
  static const int lens[] = { 0, 1, 31, 32, 33, 512, 1024, 2048, 4096, 32768, 131072, 262144 };
  DcpkKvLayout l = { 4, 256, DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 };

  for (int rows = 1; rows <= 200; rows++)
    for (guint i = 0; i < G_N_ELEMENTS (lens); i++)
      {
        gsize ws = dcpk_attention_workspace_bytes (&l, 24, rows, lens[i]);
        g_assert_cmpuint (ws, >=, (gsize) rows * 24 * 258 * sizeof (float));   /* one split */
        g_assert_cmpuint (ws, <=, dcpk_attention_workspace_bytes (&l, 24, rows + 1, lens[i]));
        if (i + 1 < G_N_ELEMENTS (lens))
          g_assert_cmpuint (ws, <=, dcpk_attention_workspace_bytes (&l, 24, rows, lens[i + 1]));
      }
}

/* CPU only: the paged double reference against the dense FP32 loop of the CPU backend. */
static void
test_reference (void)
{
  static const Case small[] = {
    { 6, 2, 64, 3, { 5, 600, 1030 }, { 1, 2, 4 }, 3 },
    { 4, 1, 256, 2, { 513, 70 }, { 3, 1 }, 3, DCPK_FORMAT_MXFP8_E4M3, DCPK_FORMAT_MXFP4_E2M1 },
  };
  g_autoptr (GRand) rng = g_rand_new_with_seed (5);

  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    {
      Built b;
      gsize n;
      g_autofree float *a = NULL, *d = NULL;
      float scale = 1.0f / sqrtf ((float) small[i].head_dim);
      double e;

      build (&small[i], rng, &b);
      n = (gsize) b.n_rows * small[i].n_heads * small[i].head_dim;
      a = g_new (float, n);
      d = g_new (float, n);
      ref_attention (&b, scale, a);
      dense_attention (&b, scale, d);
      e = dcpk_test_rel_err (d, a, n);
      g_test_message ("case %u: paged reference vs CPU backend loop: rel err %.3g", i, e);
      g_assert_cmpfloat (e, <=, 1e-5);
      built_clear (&b);
    }
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gpu/attention-decode/reference", test_reference);
  g_test_add_func ("/gpu/attention-decode/workspace", test_workspace);
  if (gpu)
    {
      g_test_add_func ("/gpu/attention-decode/shapes", test_attention_decode);
      g_test_add_func ("/gpu/attention-decode/rejects", test_rejects);
    }
  return dcpk_test_run (gpu);
}
