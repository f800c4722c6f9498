// SPDX-License-Identifier: MIT
// Decode attention over a paged KV cache (docs/MODEL.md §2.2 steps 6-7): for each query row
// (one token of a sequence, or up to DCPK_ATTN_MAX_QUERIES tokens of a draft to verify), every
// query head h attends causally to its sequence's keys of kv head h / group (GQA), scale given
// (1/16 for head_dim 256), and the result is multiplied by sigmoid(gate).
//
// Page layout (one layer; pages consecutive at dcpk_kv_page_bytes): a K block then a V block,
// each [kv_head][512 tokens][head_dim] BF16, so a token's head is one contiguous 512-byte row
// (head_dim 256). Page tables are FlashInfer's CSR: indptr [n_seqs + 1], indices [pages],
// last_page_len [n_seqs]; token p of a sequence is in page indices[indptr[s] + p / 512] at
// slot p % 512. Queries: qg [rows, n_heads, 2·head_dim], per head [q | gate] (the q_proj output
// after the head norm and RoPE); out [rows, n_heads·head_dim].
//
// Split-K (flash-decoding): the keys of a sequence are cut into n_splits chunks of `chunk`
// tokens, n_splits = min(ceil(max_kv_len / 32), ceil(256 / n_rows)): at batch 1 a 1K context
// gives 32 chunks of 32 keys (128 blocks for 4 kv heads), a 128K one 256 chunks of 512, so the
// card is full at any batch while the partial results stay ~256 rows x heads x head_dim floats.
// partial_kernel: a block of 4 warps per (chunk, kv head, group of 8 query rows, sequence); a
// query row is (query token, head of the kv head's group). Warp w takes tiles of 4 consecutive
// keys (w·4, w·4 + 16, ...), loading the next tile's K and V rows (16-byte loads, a lane holds
// head_dim/32 consecutive dims) while it computes the current one. Per tile the 4 x 8 dot
// products are summed over the warp at once (halving: 31 shuffles, one score per lane), then
// one online-softmax step per row (max, sum, unnormalised output in registers) and o += p · v.
// The warps merge through shared memory and the block writes its (max, sum, output) to the
// workspace. combine_kernel: a block per (row, head) weighs the chunks by exp(m_i - max) (in
// parallel, into shared memory), sums them, normalises and applies the gate. K and V are read
// once per (kv head, row group).

#include <math.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"
#include "dcpk-kv.cuh"

namespace {

constexpr int kWarps = 4;
constexpr int kRows = 8;          // query rows per block
constexpr int kUnroll = 4;        // keys per warp tile
constexpr int kMinChunk = 32;     // keys
constexpr int kSplitRows = 256;   // target of rows x splits; also the most splits
constexpr int kMaxSplits = kSplitRows;
static_assert (kRows * kUnroll == 32, "a tile's scores are one per lane");
static_assert (kMinChunk % (kWarps * kUnroll) == 0, "chunks are whole block steps");
using dcpk_kv::kPage;

struct Args
{
  const unsigned char *pages;
  size_t page_bytes, v_offset;    // bytes of a page, offset of its V block
  size_t k_scales, v_scales;      // MX: offsets of the K and V scale planes in a page
  int k_format, v_format;
  const int32_t *indptr, *indices, *last_len, *q_indptr;
  const float *qg;
  float *part_o;                  // [rows, n_heads, n_splits, head_dim]
  float2 *part_ml;                // [rows, n_heads, n_splits] (max, sum)
  int n_kv, n_heads, group, n_splits, chunk, row_groups;
  float scale;
};

template <int DPL> struct Raw;
template <> struct Raw<8> { uint4 v; };
template <> struct Raw<4> { uint2 v; };
template <> struct Raw<2> { unsigned v; };

__device__ __forceinline__ void
unpack2 (unsigned w, float *f)
{
  f[0] = __uint_as_float (w << 16);
  f[1] = __uint_as_float (w & 0xffff0000u);
}

__device__ __forceinline__ void
unpack (const Raw<8> &r, float *f)
{
  unpack2 (r.v.x, f);
  unpack2 (r.v.y, f + 2);
  unpack2 (r.v.z, f + 4);
  unpack2 (r.v.w, f + 6);
}

__device__ __forceinline__ void
unpack (const Raw<4> &r, float *f)
{
  unpack2 (r.v.x, f);
  unpack2 (r.v.y, f + 2);
}

__device__ __forceinline__ void
unpack (const Raw<2> &r, float *f)
{
  unpack2 (r.v, f);
}

// MX (head_dim 256): a lane's 8 dims of a token's head row, as raw words, and its block scale.
__device__ __forceinline__ void
load_mx (const unsigned char *page, size_t plane, size_t scales, int bits, size_t row, int lane,
         uint4 &raw, unsigned &scale)
{
  const unsigned char *p = page + plane + row * 256 * bits / 8 + lane * bits;
  switch (bits)
    {
    case 16:
      raw = *(const uint4 *) p;
      scale = 0;   // unused
      return;
    case 8:
      {
        uint2 w = *(const uint2 *) p;
        raw.x = w.x;
        raw.y = w.y;
        break;
      }
    case 6:
      {
        const unsigned short *h = (const unsigned short *) p;
        raw.x = h[0] | (unsigned) h[1] << 16;
        raw.y = h[2];
        break;
      }
    default:
      raw.x = *(const unsigned *) p;
      break;
    }
  scale = page[scales + row * 8 + lane / 4];
}

__device__ __forceinline__ void
decode_mx (const uint4 &raw, unsigned scale, int bits, const float *lut, float *f)
{
  float x = dcpk_kv::e8m0_value (scale);
  unsigned long long w = raw.x | (unsigned long long) raw.y << 32;

  if (bits == 16)
    {
      Raw<8> r;
      r.v = raw;
      unpack (r, f);
      return;
    }
#pragma unroll
  for (int j = 0; j < 8; j++)
    {
      unsigned code = bits == 8 ? (unsigned) (w >> 8 * j) & 255u
                      : bits == 6 ? (unsigned) (w >> 6 * j) & 63u
                                  : (unsigned) (w >> 4 * j) & 15u;
      f[j] = lut[code] * x;
    }
}

// A warp's tile: kUnroll consecutive keys, as loaded (all in one page: tiles start at multiples
// of kUnroll). Keys past the chunk's end are zeros, so that p · v stays 0 for them.
template <int DPL, bool MX> struct Tile
{
  Raw<DPL> k[MX ? 1 : kUnroll], v[MX ? 1 : kUnroll];
  uint4 kmx[MX ? kUnroll : 1], vmx[MX ? kUnroll : 1];
  unsigned ksc, vsc;   // MX: the keys' E8M0 scales, byte u for key u
};

template <int DPL, bool MX>
__device__ __forceinline__ void
load_tile (const Args &a, Tile<DPL, MX> &t, int key0, int end, int page0, int kvh, int k_bits,
           int v_bits, int lane)
{
  constexpr int HD = DPL * 32;
  const unsigned char *page = nullptr;

  if (key0 < end)
    page = a.pages + (size_t) a.indices[page0 + key0 / kPage] * a.page_bytes;
  t.ksc = t.vsc = 0;
#pragma unroll
  for (int u = 0; u < kUnroll; u++)
    {
      int key = key0 + u;
      size_t row = (size_t) kvh * kPage + key % kPage;
      if (MX)
        {
          unsigned ks, vs;
          if (key < end)
            {
              load_mx (page, 0, a.k_scales, k_bits, row, lane, t.kmx[MX ? u : 0], ks);
              load_mx (page, a.v_offset, a.v_scales, v_bits, row, lane, t.vmx[MX ? u : 0], vs);
              t.ksc |= ks << 8 * u;
              t.vsc |= vs << 8 * u;
            }
          else
            t.kmx[MX ? u : 0] = t.vmx[MX ? u : 0] = make_uint4 (0, 0, 0, 0);
        }
      else if (key < end)
        {
          size_t off = row * HD * 2 + lane * DPL * 2;
          t.k[MX ? 0 : u] = *(const Raw<DPL> *) (page + off);
          t.v[MX ? 0 : u] = *(const Raw<DPL> *) (page + a.v_offset + off);
        }
      else
        t.k[MX ? 0 : u] = t.v[MX ? 0 : u] = Raw<DPL> {};
    }
}

template <int DPL, bool MX>
__device__ __forceinline__ void
tile_k (const Tile<DPL, MX> &t, int u, int bits, const float *lut, float *f)
{
  if (MX)
    decode_mx (t.kmx[MX ? u : 0], (t.ksc >> 8 * u) & 255u, bits, lut, f);
  else
    unpack (t.k[MX ? 0 : u], f);
}

template <int DPL, bool MX>
__device__ __forceinline__ void
tile_v (const Tile<DPL, MX> &t, int u, int bits, const float *lut, float *f)
{
  if (MX)
    decode_mx (t.vmx[MX ? u : 0], (t.vsc >> 8 * u) & 255u, bits, lut, f);
  else
    unpack (t.v[MX ? 0 : u], f);
}

// The workspace entry of a block row (query token row / group, head of the kv head's group).
__device__ __forceinline__ size_t
part_index (const Args &a, int q0, int row, int kvh, int split)
{
  int head = kvh * a.group + row % a.group;
  return ((size_t) (q0 + row / a.group) * a.n_heads + head) * a.n_splits + split;
}

// One step of the warp sum of 2W values per lane: keep the half that lane bit W selects, add
// the partner's copy of it; W = 16, 8, 4, 2, 1 leaves the sum of value `lane` in v[0].
template <int W>
__device__ __forceinline__ void
halve (float *v, int lane)
{
  bool upper = lane & W;
#pragma unroll
  for (int j = 0; j < W; j++)
    {
      float send = upper ? v[j] : v[j + W], keep = upper ? v[j + W] : v[j];
      v[j] = keep + __shfl_xor_sync (0xffffffffu, send, W);
    }
}

template <int DPL, bool MX>
__global__ void __launch_bounds__ (kWarps * 32)
partial_kernel (Args a)
{
  constexpr int HD = DPL * 32;
  constexpr unsigned kAll = 0xffffffffu;
  __shared__ __align__ (16) float s_o[kWarps][kRows][HD];
  __shared__ float s_p[kWarps][kUnroll * kRows], s_c[kWarps][kRows];
  __shared__ float s_m[kWarps][kRows], s_l[kWarps][kRows];
  __shared__ float s_lut[2][MX ? 256 : 1];
  int split = blockIdx.x, kvh = blockIdx.y / a.row_groups, rg = blockIdx.y % a.row_groups;
  int s = blockIdx.z, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int q0 = a.q_indptr ? a.q_indptr[s] : s;
  int n_q = a.q_indptr ? a.q_indptr[s + 1] - q0 : 1;
  int page0 = a.indptr[s], n_pages = a.indptr[s + 1] - page0;
  int kv_len = n_pages > 0 ? (n_pages - 1) * kPage + a.last_len[s] : 0;
  int begin = split * a.chunk, end = min (kv_len, begin + a.chunk);
  int n_rows = min (kRows, n_q * a.group - rg * kRows);
  // After the reduction of a tile, lane l holds the score of key l / kRows, row l % kRows.
  int my_r = lane % kRows, my_u = lane / kRows;
  int my_limit = my_r < n_rows ? kv_len - n_q + (rg * kRows + my_r) / a.group : -1;
  float q[kRows][DPL], o[kRows][DPL], m_run = -INFINITY, l_run = 0.f;
  Tile<DPL, MX> cur, nxt;

  if (n_rows <= 0)
    return;
  if (begin >= end)   // a chunk past this sequence's keys: only "no keys" for combine_kernel
    {
      if (threadIdx.x < n_rows)
        a.part_ml[part_index (a, q0, rg * kRows + threadIdx.x, kvh, split)]
            = make_float2 (-INFINITY, 0.f);
      return;
    }
  if (MX)
    {
      for (int c = threadIdx.x; c < 256; c += blockDim.x)
        {
          s_lut[0][c] = dcpk_kv::code_value (a.k_format, c);
          s_lut[1][c] = dcpk_kv::code_value (a.v_format, c);
        }
      __syncthreads ();
    }
  const int k_bits = dcpk_kv::format_bits (a.k_format), v_bits = dcpk_kv::format_bits (a.v_format);
  int key0 = begin + warp * kUnroll;

  load_tile (a, cur, key0, end, page0, kvh, k_bits, v_bits, lane);
#pragma unroll
  for (int r = 0; r < kRows; r++)
    {
      int row = rg * kRows + r, tok = row / a.group, head = kvh * a.group + row % a.group;
      bool valid = r < n_rows;
      const float *qp = a.qg + ((size_t) (q0 + tok) * a.n_heads + head) * 2 * HD + lane * DPL;
#pragma unroll
      for (int d = 0; d < DPL; d++)
        {
          q[r][d] = valid ? qp[d] * a.scale : 0.f;
          o[r][d] = 0.f;
        }
    }

  for (; key0 < end; key0 += kWarps * kUnroll)
    {
      float v[kUnroll * kRows];

      load_tile (a, nxt, key0 + kWarps * kUnroll, end, page0, kvh, k_bits, v_bits, lane);
      // Each lane's share of the kUnroll x kRows dot products ...
#pragma unroll
      for (int u = 0; u < kUnroll; u++)
        {
          float k[DPL];
          tile_k (cur, u, k_bits, s_lut[0], k);
#pragma unroll
          for (int r = 0; r < kRows; r++)
            {
              float dot = 0.f;
              if (r < n_rows)   // block-uniform: the unused rows of the last group
#pragma unroll
                for (int d = 0; d < DPL; d++)
                  dot = fmaf (q[r][d], k[d], dot);
              v[u * kRows + r] = dot;
            }
        }
      // ... summed over the warp by halving (31 shuffles for the 32 sums).
      halve<16> (v, lane);
      halve<8> (v, lane);
      halve<4> (v, lane);
      halve<2> (v, lane);
      halve<1> (v, lane);
      // One online-softmax step per row for the whole tile; the lanes of a row are l % kRows.
      {
        int key = key0 + my_u;
        float sc = key < end && key <= my_limit ? v[0] : -INFINITY;
        float tm = fmaxf (sc, __shfl_xor_sync (kAll, sc, kRows));
        float m_new, corr, p, ps;

        tm = fmaxf (tm, __shfl_xor_sync (kAll, tm, 2 * kRows));
        m_new = fmaxf (m_run, tm);
        corr = m_new == -INFINITY ? 1.f : __expf (m_run - m_new);
        p = sc == -INFINITY ? 0.f : __expf (sc - m_new);
        ps = p + __shfl_xor_sync (kAll, p, kRows);
        ps += __shfl_xor_sync (kAll, ps, 2 * kRows);
        l_run = l_run * corr + ps;
        m_run = m_new;
        s_p[warp][lane] = p;
        if (lane < kRows)
          s_c[warp][lane] = corr;
      }
      __syncwarp ();
#pragma unroll
      for (int r = 0; r < kRows; r++)
        {
          float c = s_c[warp][r];
          if (r < n_rows && c != 1.f)   // warp-uniform; 1 once the row's max has settled
#pragma unroll
            for (int d = 0; d < DPL; d++)
              o[r][d] *= c;
        }
#pragma unroll
      for (int u = 0; u < kUnroll; u++)
        {
          float vv[DPL];
          tile_v (cur, u, v_bits, s_lut[1], vv);
#pragma unroll
          for (int r = 0; r < kRows; r++)
            if (r < n_rows)
              {
                float p = s_p[warp][u * kRows + r];
#pragma unroll
                for (int d = 0; d < DPL; d++)
                  o[r][d] = fmaf (p, vv[d], o[r][d]);
              }
        }
      __syncwarp ();   // s_p and s_c are rewritten by the next tile
      cur = nxt;
    }

  // Merge the warps: each warp's output rescaled to the block's max per row, summed in order.
  if (lane < kRows)
    {
      s_m[warp][lane] = m_run;
      s_l[warp][lane] = l_run;
    }
  __syncthreads ();
#pragma unroll
  for (int r = 0; r < kRows; r++)
    {
      float bm = -INFINITY, corr;
      if (r >= n_rows)
        break;
      for (int w = 0; w < kWarps; w++)
        bm = fmaxf (bm, s_m[w][r]);
      corr = s_m[warp][r] == -INFINITY ? 0.f : __expf (s_m[warp][r] - bm);
#pragma unroll
      for (int d = 0; d < DPL; d++)
        s_o[warp][r][lane * DPL + d] = o[r][d] * corr;
    }
  __syncthreads ();
  for (int i = threadIdx.x; i < n_rows * HD; i += blockDim.x)
    {
      int r = i / HD, d = i % HD;
      size_t idx = part_index (a, q0, rg * kRows + r, kvh, split);
      float sum = 0.f;
      for (int w = 0; w < kWarps; w++)
        sum += s_o[w][r][d];
      a.part_o[idx * HD + d] = sum;
      if (d == 0)
        {
          float bm = -INFINITY, l = 0.f;
          for (int w = 0; w < kWarps; w++)
            bm = fmaxf (bm, s_m[w][r]);
          for (int w = 0; w < kWarps; w++)
            if (s_m[w][r] != -INFINITY)
              l += s_l[w][r] * __expf (s_m[w][r] - bm);
          a.part_ml[idx] = make_float2 (bm, l);
        }
    }
}

// A block per (row, head), a thread per dim: the splits' weights exp(m_i - max) in parallel into
// shared memory, then each thread sums its dim over the splits that saw keys (the others wrote
// no output).
__global__ void
combine_kernel (const float *__restrict__ part_o, const float2 *__restrict__ part_ml,
                const float *__restrict__ qg, int n_heads, int n_splits, int head_dim,
                float *__restrict__ out)
{
  __shared__ float s_w[kMaxSplits], s_red[2][8];
  int rh = blockIdx.x, d = threadIdx.x, lane = d % 32, warp = d / 32, n_warps = blockDim.x / 32;
  const float2 *ml = part_ml + (size_t) rh * n_splits;
  const float *po = part_o + (size_t) rh * n_splits * head_dim + d;
  float mx = -INFINITY, sum = 0.f, acc = 0.f, gate;

  for (int i = d; i < n_splits; i += blockDim.x)
    mx = fmaxf (mx, ml[i].x);
  for (int off = 16; off > 0; off /= 2)
    mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, off));
  if (lane == 0)
    s_red[0][warp] = mx;
  __syncthreads ();
  for (int w = 0; w < n_warps; w++)
    mx = fmaxf (mx, s_red[0][w]);
  for (int i = d; i < n_splits; i += blockDim.x)
    {
      float2 e = ml[i];
      float w = e.x == -INFINITY ? 0.f : __expf (e.x - mx);
      s_w[i] = w;
      sum += e.y * w;
    }
  sum = dcpk_warp_sum (sum);
  if (lane == 0)
    s_red[1][warp] = sum;
  __syncthreads ();
  sum = 0.f;
  for (int w = 0; w < n_warps; w++)
    sum += s_red[1][w];
#pragma unroll 8
  for (int i = 0; i < n_splits; i++)
    {
      float w = s_w[i];
      acc = fmaf (w, w != 0.f ? po[(size_t) i * head_dim] : 0.f, acc);
    }
  gate = qg[(size_t) rh * 2 * head_dim + head_dim + d];
  out[(size_t) rh * head_dim + d] = sum > 0.f ? acc / sum / (1.f + __expf (-gate)) : 0.f;
}

// Splits over the keys: as many as fill the card at small batches (kSplitRows / n_rows, so
// n_rows x n_splits stays near kSplitRows and the workspace small), but no chunk shorter than
// kMinChunk keys. Depends on n_rows and max_kv_len only (a captured graph's shape).
int
splits_by_len (int max_kv_len)
{
  int splits = (max_kv_len + kMinChunk - 1) / kMinChunk;
  return splits < 1 ? 1 : splits;
}

int
n_splits_for (int n_rows, int max_kv_len)
{
  int by_len = splits_by_len (max_kv_len);
  int by_rows = (kSplitRows + n_rows - 1) / (n_rows < 1 ? 1 : n_rows);
  return by_rows < 1 ? 1 : by_rows < by_len ? by_rows : by_len;
}

bool
layout_ok (const DcpkKvLayout *l)
{
  return l && l->n_kv_heads > 0 && (l->head_dim == 64 || l->head_dim == 128 || l->head_dim == 256)
         && dcpk_kv_page_bytes (l) > 0;
}

} // namespace

extern "C" size_t
dcpk_attention_workspace_bytes (const DcpkKvLayout *layout, int n_heads, int n_rows,
                                int max_kv_len)
{
  if (!layout_ok (layout) || n_heads <= 0 || n_rows < 0 || max_kv_len < 0)
    return 0;
  // n_rows x n_splits_for (n_rows, max_kv_len) is at most both n_rows x splits_by_len and
  // kSplitRows + n_rows; the smaller bound grows with n_rows and max_kv_len, so a workspace
  // sized for the largest batch and bucket serves every smaller call.
  size_t units = (size_t) n_rows * splits_by_len (max_kv_len);
  if (units > (size_t) kSplitRows + n_rows)
    units = (size_t) kSplitRows + n_rows;
  return units * n_heads * (layout->head_dim + 2) * sizeof (float);
}

extern "C" int
dcpk_attention_decode (const DcpkKvLayout *layout, int n_heads, float scale, const void *d_pages,
                       const int32_t *d_page_indptr, const int32_t *d_page_indices,
                       const int32_t *d_last_page_len, int n_seqs, const int32_t *d_q_indptr,
                       int n_rows, int max_kv_len, const float *d_qg, float *d_out,
                       void *d_workspace, void *stream)
{
  cudaStream_t st = (cudaStream_t) stream;
  Args a;
  int max_q = d_q_indptr ? DCPK_ATTN_MAX_QUERIES : 1;
  dim3 grid;

  bool mx = layout_ok (layout)
            && (layout->k_format != DCPK_FORMAT_BF16 || layout->v_format != DCPK_FORMAT_BF16);

  if (!layout_ok (layout) || (mx && layout->head_dim != 256) || n_heads <= 0
      || n_heads % layout->n_kv_heads != 0 || n_seqs < 0 || n_rows < 0 || max_kv_len < 0
      || (!d_q_indptr && n_rows != n_seqs) || !d_pages || !d_page_indptr || !d_page_indices
      || !d_last_page_len || !d_qg || !d_out || !d_workspace)
    return (int) cudaErrorInvalidValue;
  if (n_seqs == 0 || n_rows == 0)
    return 0;
  a.pages = (const unsigned char *) d_pages;
  a.page_bytes = dcpk_kv_page_bytes (layout);
  a.v_offset = dcpk_kv::block_bytes (layout->k_format, layout->n_kv_heads, layout->head_dim);
  a.k_scales = dcpk_kv::elements_bytes (layout->k_format, layout->n_kv_heads, layout->head_dim);
  a.v_scales = a.v_offset
               + dcpk_kv::elements_bytes (layout->v_format, layout->n_kv_heads, layout->head_dim);
  a.k_format = layout->k_format;
  a.v_format = layout->v_format;
  a.indptr = d_page_indptr;
  a.indices = d_page_indices;
  a.last_len = d_last_page_len;
  a.q_indptr = d_q_indptr;
  a.qg = d_qg;
  a.n_kv = layout->n_kv_heads;
  a.n_heads = n_heads;
  a.group = n_heads / layout->n_kv_heads;
  a.n_splits = n_splits_for (n_rows, max_kv_len);
  a.chunk = ((max_kv_len + a.n_splits - 1) / a.n_splits + kMinChunk - 1) / kMinChunk * kMinChunk;
  a.row_groups = (max_q * a.group + kRows - 1) / kRows;
  a.scale = scale;
  a.part_o = (float *) d_workspace;
  a.part_ml = (float2 *) (a.part_o + (size_t) n_rows * n_heads * a.n_splits * layout->head_dim);
  grid = dim3 (a.n_splits, a.n_kv * a.row_groups, n_seqs);
  if (grid.y > 65535 || grid.z > 65535)
    return (int) cudaErrorInvalidValue;
  if (mx)
    partial_kernel<8, true><<<grid, kWarps * 32, 0, st>>> (a);
  else
    switch (layout->head_dim)
      {
      case 64:
        partial_kernel<2, false><<<grid, kWarps * 32, 0, st>>> (a);
        break;
      case 128:
        partial_kernel<4, false><<<grid, kWarps * 32, 0, st>>> (a);
        break;
      default:
        partial_kernel<8, false><<<grid, kWarps * 32, 0, st>>> (a);
        break;
      }
  DCPK_TRY_LAUNCH ();
  combine_kernel<<<n_rows * n_heads, layout->head_dim, 0, st>>> (
      a.part_o, a.part_ml, d_qg, n_heads, a.n_splits, layout->head_dim, d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}
