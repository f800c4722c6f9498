// SPDX-License-Identifier: MIT
// Decode attention over a paged KV cache (shared/MODEL.md §2.2 steps 6-7): for each query row
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
// tokens (n_splits = min(64, ceil(max_kv_len / 256)), so one 128K sequence still gives
// 64 x kv_heads blocks). partial_kernel: a block per (chunk, kv head, group of 8 query rows,
// sequence); a query row is (query token, head of the kv head's group). Each of its 8 warps
// takes every 8th key of the chunk, 4 keys at a time with 16-byte loads (a lane holds
// head_dim/32 consecutive dims of q, k, v), keeps an online softmax (max, sum, unnormalised
// output) per row in registers; the warps merge through shared memory and the block writes its
// (max, sum, output) to the workspace. combine_kernel: a block per (row, head) rescales and sums
// the chunks, normalises and applies the gate. K and V are read once per (kv head, row group).

#include <math.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"
#include "dcpk-kv.cuh"

namespace {

constexpr int kWarps = 8;
constexpr int kRows = 8;          // query rows per block
constexpr int kUnroll = 4;        // keys per warp in flight
constexpr int kMinChunk = 256;
constexpr int kMaxSplits = 64;
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

template <int DPL, bool MX>
__global__ void __launch_bounds__ (kWarps * 32)
partial_kernel (Args a)
{
  constexpr int HD = DPL * 32;
  __shared__ float s_m[kWarps][kRows], s_l[kWarps][kRows];
  __shared__ float s_o[kRows][HD];
  __shared__ float s_lut[2][MX ? 256 : 1];
  int split = blockIdx.x, kvh = blockIdx.y / a.row_groups, rg = blockIdx.y % a.row_groups;
  int s = blockIdx.z, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int q0 = a.q_indptr ? a.q_indptr[s] : s;
  int n_q = a.q_indptr ? a.q_indptr[s + 1] - q0 : 1;
  int page0 = a.indptr[s], n_pages = a.indptr[s + 1] - page0;
  int kv_len = n_pages > 0 ? (n_pages - 1) * kPage + a.last_len[s] : 0;
  int begin = split * a.chunk, end = min (kv_len, begin + a.chunk);
  int n_rows = min (kRows, n_q * a.group - rg * kRows);
  float q[kRows][DPL], o[kRows][DPL], m[kRows], l[kRows];
  int limit[kRows];

  if (n_rows <= 0)
    return;
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
  const size_t head_off = (size_t) kvh * kPage * HD * 2;
#pragma unroll
  for (int r = 0; r < kRows; r++)
    {
      int row = rg * kRows + r, tok = row / a.group, head = kvh * a.group + row % a.group;
      bool valid = r < n_rows;
      const float *qp = a.qg + ((size_t) (q0 + tok) * a.n_heads + head) * 2 * HD + lane * DPL;
      limit[r] = valid ? kv_len - n_q + tok : -1;   // last key this row sees
#pragma unroll
      for (int d = 0; d < DPL; d++)
        {
          q[r][d] = valid ? qp[d] * a.scale : 0.f;
          o[r][d] = 0.f;
        }
      m[r] = -INFINITY;
      l[r] = 0.f;
    }

  for (int base = begin + warp * kUnroll; base < end; base += kWarps * kUnroll)
    {
      Raw<DPL> kraw[kUnroll], vraw[kUnroll];
      uint4 kmx[MX ? kUnroll : 1], vmx[MX ? kUnroll : 1];
      unsigned ksc[MX ? kUnroll : 1], vsc[MX ? kUnroll : 1];
#pragma unroll
      for (int u = 0; u < kUnroll; u++)
        {
          int key = base + u;
          if (key < end)
            {
              const unsigned char *page
                  = a.pages + (size_t) a.indices[page0 + key / kPage] * a.page_bytes;
              if (MX)
                {
                  size_t row = (size_t) kvh * kPage + key % kPage;
                  load_mx (page, 0, a.k_scales, k_bits, row, lane, kmx[MX ? u : 0], ksc[MX ? u : 0]);
                  load_mx (page, a.v_offset, a.v_scales, v_bits, row, lane, vmx[MX ? u : 0],
                           vsc[MX ? u : 0]);
                }
              else
                {
                  size_t off = head_off + (size_t) (key % kPage) * HD * 2 + lane * DPL * 2;
                  kraw[u] = *(const Raw<DPL> *) (page + off);
                  vraw[u] = *(const Raw<DPL> *) (page + a.v_offset + off);
                }
            }
        }
#pragma unroll
      for (int u = 0; u < kUnroll; u++)
        {
          int key = base + u;
          float k[DPL], v[DPL];
          if (key >= end)
            break;
          if (MX)
            {
              decode_mx (kmx[MX ? u : 0], ksc[MX ? u : 0], k_bits, s_lut[0], k);
              decode_mx (vmx[MX ? u : 0], vsc[MX ? u : 0], v_bits, s_lut[1], v);
            }
          else
            {
              unpack (kraw[u], k);
              unpack (vraw[u], v);
            }
#pragma unroll
          for (int r = 0; r < kRows; r++)
            {
              float sc = 0.f, p;
              if (r >= n_rows)   // block-uniform: the unused rows of the last group
                break;
#pragma unroll
              for (int d = 0; d < DPL; d++)
                sc = fmaf (q[r][d], k[d], sc);
              sc = dcpk_warp_sum (sc);
              if (key > limit[r])
                continue;
              if (sc > m[r])
                {
                  float corr = __expf (m[r] - sc);
                  l[r] *= corr;
#pragma unroll
                  for (int d = 0; d < DPL; d++)
                    o[r][d] *= corr;
                  m[r] = sc;
                }
              p = __expf (sc - m[r]);
              l[r] += p;
#pragma unroll
              for (int d = 0; d < DPL; d++)
                o[r][d] = fmaf (p, v[d], o[r][d]);
            }
        }
    }

  // Merge the warps: the block's max per row, then each warp's share rescaled into s_o.
  for (int i = threadIdx.x; i < kRows * HD; i += blockDim.x)
    s_o[i / HD][i % HD] = 0.f;
  if (lane == 0)
    for (int r = 0; r < kRows; r++)
      s_m[warp][r] = m[r];
  __syncthreads ();
#pragma unroll
  for (int r = 0; r < kRows; r++)
    {
      float bm = -INFINITY, corr;
      for (int w = 0; w < kWarps; w++)
        bm = fmaxf (bm, s_m[w][r]);
      corr = m[r] == -INFINITY ? 0.f : __expf (m[r] - bm);
      if (lane == 0)
        s_l[warp][r] = l[r] * corr;
#pragma unroll
      for (int d = 0; d < DPL; d++)
        if (corr != 0.f)
          atomicAdd (&s_o[r][lane * DPL + d], o[r][d] * corr);
      m[r] = bm;
    }
  __syncthreads ();
  for (int i = threadIdx.x; i < n_rows * HD; i += blockDim.x)
    {
      int r = i / HD, d = i % HD, row = rg * kRows + r;
      int head = kvh * a.group + row % a.group;
      size_t idx = ((size_t) (q0 + row / a.group) * a.n_heads + head) * a.n_splits + split;
      a.part_o[idx * HD + d] = s_o[r][d];
      if (d == 0)
        {
          float sum = 0.f;
          for (int w = 0; w < kWarps; w++)
            sum += s_l[w][r];
          a.part_ml[idx] = make_float2 (m[r], sum);
        }
    }
}

__global__ void
combine_kernel (const float *__restrict__ part_o, const float2 *__restrict__ part_ml,
                const float *__restrict__ qg, int n_heads, int n_splits, int head_dim,
                float *__restrict__ out)
{
  int rh = blockIdx.x, d = threadIdx.x;   // rh = row · n_heads + head
  const float2 *ml = part_ml + (size_t) rh * n_splits;
  const float *po = part_o + (size_t) rh * n_splits * head_dim;
  float mx = -INFINITY, sum = 0.f, acc = 0.f, gate;

  for (int i = 0; i < n_splits; i++)
    mx = fmaxf (mx, ml[i].x);
  for (int i = 0; i < n_splits; i++)
    if (ml[i].x != -INFINITY)
      {
        float w = __expf (ml[i].x - mx);
        sum += ml[i].y * w;
        acc = fmaf (po[(size_t) i * head_dim + d], w, acc);
      }
  gate = qg[(size_t) rh * 2 * head_dim + head_dim + d];
  out[(size_t) rh * head_dim + d] = sum > 0.f ? acc / sum / (1.f + __expf (-gate)) : 0.f;
}

int
n_splits_for (int max_kv_len)
{
  int splits = (max_kv_len + kMinChunk - 1) / kMinChunk;
  return splits < 1 ? 1 : splits > kMaxSplits ? kMaxSplits : splits;
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
  return (size_t) n_rows * n_heads * n_splits_for (max_kv_len)
         * (layout->head_dim + 2) * sizeof (float);
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
  a.n_splits = n_splits_for (max_kv_len);
  a.chunk = ((max_kv_len + a.n_splits - 1) / a.n_splits + 31) / 32 * 32;
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
