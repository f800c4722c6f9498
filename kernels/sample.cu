// SPDX-License-Identifier: MIT
// On-device sampling of one token per logit row, with the semantics of
// engine/runtime/dcp-sampler.c (no banned tokens): penalties, then greedy when temperature is 0,
// else softmax(logits / T), top-k, top-p, min-p (each on what the previous left) and a draw.
//
// A block of 1024 threads per row; the row (vocab FP32, 1 MB for the 27B) stays in L2 across the
// passes below. Order is that of the CPU sampler: a token's key is
// (its penalised logit as an order-preserving uint32) << 32 | (vocab - 1 - id), so descending
// keys are "most likely first, lower id first on ties" and every key is unique. Weights are
// e^((l - max) / T) (expf), recomputed per pass (never normalised: every cut is scale-invariant),
// and summed in double, so that the cuts fall where the CPU's double sums put them.
// Fast paths (the common cases), same distribution:
// - top-k of at most kCandidates: the k-th largest key is found by radix selection on the 32 logit
//   bits with token counts (three passes of 11 bits, integer shared atomics, no exp), the tokens
//   at or above it are gathered into shared memory, sorted by key (bitonic), cut to k, and top-p,
//   min-p and the draw walk that short sorted list in double as the CPU sampler does;
// - top-p without top-k: the same list of the kCandidates most likely tokens, with top-p's total
//   taken over the whole vocabulary; when the list's running weight reaches the nucleus, the
//   nucleus is inside it and the walk is the CPU's, else the general path runs;
// - no top-k and no top-p (temperature, min-p): the order of the walk does not change the
//   distribution, so the draw walks the vocabulary in id order: each thread sums the weights of
//   its contiguous slice, a scan over the slices finds the one holding the target, and its
//   thread walks it.
// The rest (a nucleus of more than kCandidates tokens) takes the general path below.
// One primitive does all the cuts of the general path: `select` finds, among the included tokens in descending key
// order, the first one at which the running weight reaches a target (>= for top-k with unit
// weights and top-p, > for the draw), by radix selection on the key, 8 bits a pass from the top:
// a shared histogram of weight per digit, a walk down the 256 bins, the chosen digit appended to
// the prefix. Lanes of a warp with the same digit first sum their weights (match_any) so that a
// crowded bin takes one shared atomic per warp. The draw: u in [0, 1) from Philox4_32_10
// (seed, subsequence step), target u x kept mass; the token is where the running mass of the kept
// tokens first exceeds it, as the CPU sampler walks its sorted list.

#include <curand_kernel.h>
#include <math.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kCandidates = 2048;   // sorted in shared memory (16 KiB of keys)
constexpr int kBins = 2048;         // radix digits of 11 bits

struct Row
{
  const float *logits;
  int vocab, low_digits;         // 8-bit digits of the id part of a key
  float max, inv_t, min_p;
  unsigned long long lower;      // only keys >= lower are included
};

__device__ __forceinline__ unsigned long long
key_of (const Row &r, int i)
{
  unsigned bits = __float_as_uint (r.logits[i]);
  bits ^= (bits >> 31) ? 0xffffffffu : 0x80000000u;
  return ((unsigned long long) bits << 32) | (unsigned) (r.vocab - 1 - i);
}

__device__ __forceinline__ float
weight_of (const Row &r, int i)
{
  return expf ((r.logits[i] - r.max) * r.inv_t);
}

__device__ __forceinline__ bool
included (const Row &r, unsigned long long key, float w)
{
  return key >= r.lower && (r.min_p <= 0.f || w >= r.min_p);
}

__device__ double
block_sum (double v, double *red)
{
  int warp = threadIdx.x / 32;
  v = dcpk_warp_sum (v);
  __syncthreads ();
  if (threadIdx.x % 32 == 0)
    red[warp] = v;
  __syncthreads ();
  v = 0.0;
  for (int i = 0; i < kWarps; i++)
    v += red[i];
  return v;
}

// Mass of the included tokens.
__device__ double
kept_mass (const Row &r, double *red)
{
  double sum = 0.0;
  for (int i = threadIdx.x; i < r.vocab; i += kThreads)
    {
      float w = weight_of (r, i);
      if (included (r, key_of (r, i), w))
        sum += w;
    }
  return block_sum (sum, red);
}

// The key of the first included token, in descending key order, at which the running weight
// (unit weights when `count`) reaches target: >= target, or > target when `strict`. When
// rounding leaves the target unreached, the last included token.
__device__ unsigned long long
select (const Row &r, bool count, double target, bool strict, double *hist, int *choice,
        double *above_s)
{
  unsigned long long prefix = 0, mask = 0;
  double above = 0.0;
  int lane = threadIdx.x % 32;
  int n_pass = 4 + r.low_digits;

  for (int pass = 0; pass < n_pass; pass++)
    {
      int shift = pass < 4 ? 56 - 8 * pass : 8 * (n_pass - 1 - pass);
      for (int b = threadIdx.x; b < 256; b += kThreads)
        hist[b] = 0.0;
      __syncthreads ();
      for (int base = threadIdx.x - lane; base < r.vocab; base += kThreads)
        {
          int i = base + lane;
          unsigned active = __ballot_sync (0xffffffffu, i < r.vocab);
          if (i < r.vocab)
            {
              unsigned long long key = key_of (r, i);
              float w = weight_of (r, i);
              bool in = included (r, key, w) && (key & mask) == prefix;
              int digit = in ? (int) ((key >> shift) & 255) : 256;
              unsigned peers = __match_any_sync (active, digit);
              double sum = 0.0;
              for (unsigned rest = peers; rest; rest &= rest - 1)
                sum += __shfl_sync (peers, count ? 1.0 : (double) w, __ffs (rest) - 1);
              if (in && lane == __ffs (peers) - 1)
                atomicAdd (&hist[digit], sum);
            }
        }
      __syncthreads ();
      if (threadIdx.x == 0)
        {
          int chosen = -1;
          bool reached = false;
          for (int b = 255; b >= 0 && !reached; b--)
            {
              double h = hist[b];
              if (h <= 0.0)
                continue;
              chosen = b;
              reached = strict ? above + h > target : above + h >= target;
              if (!reached)
                above += h;
            }
          if (chosen >= 0 && !reached)
            above -= hist[chosen];   // target unreached: the last bin, without its own weight
          *choice = chosen < 0 ? 0 : chosen;
          *above_s = above;
        }
      __syncthreads ();
      prefix |= (unsigned long long) *choice << shift;
      mask |= 255ull << shift;
      above = *above_s;
      __syncthreads ();
    }
  return prefix;
}

__device__ __forceinline__ unsigned
key32_of (float l)
{
  unsigned bits = __float_as_uint (l);
  return bits ^ ((bits >> 31) ? 0xffffffffu : 0x80000000u);
}

// The key32 of the k-th largest token (k >= 1) by radix selection on key32 with counts; *above
// gets how many tokens have a larger key32.
__device__ unsigned
kth_key32 (const float *l, int vocab, int k, int *hist, int *s_choice, int *s_above)
{
  unsigned prefix = 0, mask = 0;
  int above = 0;

  for (int pass = 0; pass < 3; pass++)
    {
      int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
      unsigned digit_mask = pass == 2 ? 1023u : 2047u;
      for (int b = threadIdx.x; b < kBins; b += kThreads)
        hist[b] = 0;
      __syncthreads ();
      for (int i = threadIdx.x; i < vocab; i += kThreads)
        {
          unsigned key = key32_of (l[i]);
          if ((key & mask) == prefix)
            atomicAdd (&hist[(key >> shift) & digit_mask], 1);
        }
      __syncthreads ();
      // Warp 0 walks the bins from the top, 32 at a time.
      if (threadIdx.x < 32)
        {
          int lane = threadIdx.x, run = above, chosen = -1;
          for (int top = (int) digit_mask; top >= 0 && chosen < 0; top -= 32)
            {
              int b = top - lane;
              int h = b >= 0 ? hist[b] : 0, incl = h;
              for (int off = 1; off < 32; off <<= 1)
                {
                  int v = __shfl_up_sync (0xffffffffu, incl, off);
                  if (lane >= off)
                    incl += v;
                }
              unsigned hit = __ballot_sync (0xffffffffu, b >= 0 && run + incl >= k);
              if (hit)
                {
                  int first = __ffs (hit) - 1;
                  chosen = top - first;
                  run += __shfl_sync (0xffffffffu, incl - h, first);
                }
              else
                run += __shfl_sync (0xffffffffu, incl, 31);
            }
          if (lane == 0)
            {
              *s_choice = chosen < 0 ? 0 : chosen;
              *s_above = run;
            }
        }
      __syncthreads ();
      prefix |= (unsigned) *s_choice << shift;
      mask |= digit_mask << shift;
      above = *s_above;
      __syncthreads ();
    }
  return prefix;
}

// Bitonic sort of n (a power of two <= kCandidates) keys, descending.
__device__ void
sort_desc (unsigned long long *keys, int n)
{
  for (int size = 2; size <= n; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1)
      {
        for (int i = threadIdx.x; i < n / 2; i += kThreads)
          {
            int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
            bool desc = (lo & size) == 0;
            unsigned long long a = keys[lo], b = keys[hi];
            if ((a < b) == desc)
              {
                keys[lo] = b;
                keys[hi] = a;
              }
          }
        __syncthreads ();
      }
}

// The draw u in [0, 1) of (seed, step), 53 bits as the CPU's g_rand_double resolution.
__device__ double
draw_u (const DcpkSampleParams &p)
{
  curandStatePhilox4_32_10_t st;
  uint4 bits;

  curand_init (p.seed, p.step, 0, &st);
  bits = curand4 (&st);
  return ((double) (bits.x >> 5) * 67108864.0 + (double) (bits.y >> 6)) / 9007199254740992.0;
}

__global__ void __launch_bounds__ (kThreads)
sample_kernel (float *__restrict__ logits, int vocab, const DcpkSampleParams *__restrict__ params,
               const uint32_t *const *__restrict__ counts, int32_t *__restrict__ tokens)
{
  __shared__ double red[kWarps], hist[256], s_above;
  __shared__ float s_max[kWarps];
  __shared__ int s_arg[kWarps], s_choice, s_count, s_owner, s_beyond;
  __shared__ int s_hist[kBins];
  __shared__ unsigned long long s_keys[kCandidates];
  __shared__ float s_w[kCandidates];
  __shared__ double s_slice[kThreads], s_target;
  const DcpkSampleParams p = params[blockIdx.x];
  const uint32_t *cnt = counts ? counts[blockIdx.x] : nullptr;
  float *l = logits + (size_t) blockIdx.x * vocab;
  float best = -INFINITY;
  int arg = 0, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Row r;

  // Penalties, in double as the CPU sampler; then the argmax (lowest id on ties).
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    {
      float v = l[i];
      if (cnt)
        {
          uint32_t c = cnt[i], gen = c & ~DCPK_COUNT_SEEN;
          double x = v;
          if (gen > 0)
            x -= (double) p.presence_penalty + (double) p.frequency_penalty * gen;
          if ((gen > 0 || (c & DCPK_COUNT_SEEN)) && p.repetition_penalty != 1.f)
            x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
          v = (float) x;
          l[i] = v;
        }
      if (v > best)
        {
          best = v;
          arg = i;
        }
    }
  for (int off = 16; off > 0; off >>= 1)
    {
      float ob = __shfl_xor_sync (0xffffffffu, best, off);
      int oa = __shfl_xor_sync (0xffffffffu, arg, off);
      if (ob > best || (ob == best && oa < arg))
        {
          best = ob;
          arg = oa;
        }
    }
  if (lane == 0)
    {
      s_max[warp] = best;
      s_arg[warp] = arg;
    }
  __syncthreads ();
  best = s_max[0];
  arg = s_arg[0];
  for (int w = 1; w < kWarps; w++)
    if (s_max[w] > best || (s_max[w] == best && s_arg[w] < arg))
      {
        best = s_max[w];
        arg = s_arg[w];
      }
  if (p.temperature == 0.f || best == -INFINITY)
    {
      if (threadIdx.x == 0)
        tokens[blockIdx.x] = arg;
      return;
    }

  // Fast path 1: top-k over a short sorted candidate list. Top-p without top-k uses it too, with
  // the kCandidates most likely tokens as the list, when their weight reaches the nucleus (the
  // peaked distributions of a language model); otherwise it falls through to the general path.
  const bool has_top_k = p.top_k > 0 && p.top_k < vocab;
  const bool nucleus_list = !has_top_k && p.top_p < 1.f && vocab > kCandidates;
  if ((has_top_k && p.top_k <= kCandidates) || nucleus_list)
    {
      const int k = nucleus_list ? kCandidates : p.top_k;
      double vocab_mass = 0;
      if (nucleus_list)
        {
          // top-p's total is over the whole vocabulary when no top-k came first
          float inv_t = 1.f / p.temperature;
          for (int i = threadIdx.x; i < vocab; i += kThreads)
            vocab_mass += expf ((l[i] - best) * inv_t);
          vocab_mass = block_sum (vocab_mass, red);
        }
      unsigned t32 = kth_key32 (l, vocab, k, s_hist, &s_choice, &s_count);
      if (threadIdx.x == 0)
        s_count = 0;
      __syncthreads ();
      for (int i = threadIdx.x; i < vocab; i += kThreads)
        {
          unsigned key = key32_of (l[i]);
          if (key >= t32)
            {
              int slot = atomicAdd (&s_count, 1);
              if (slot < kCandidates)
                s_keys[slot] = (unsigned long long) key << 32 | (unsigned) (vocab - 1 - i);
            }
        }
      __syncthreads ();
      int n_cand = s_count;
      if (n_cand <= kCandidates)
        {
          int n_sort = 1;
          while (n_sort < n_cand)
            n_sort <<= 1;
          for (int i = n_cand + threadIdx.x; i < n_sort; i += kThreads)
            s_keys[i] = 0;   // below every real key (its id part is vocab - 1 - id < 2^32 - 1)
          __syncthreads ();
          sort_desc (s_keys, n_sort);
          int n = min (k, n_cand);
          float inv_t = 1.f / p.temperature;
          for (int i = threadIdx.x; i < n; i += kThreads)
            {
              int id = vocab - 1 - (int) (unsigned) (s_keys[i] & 0xffffffffu);
              s_w[i] = expf ((l[id] - best) * inv_t);
            }
          __syncthreads ();
          if (threadIdx.x == 0)
            {
              double total = vocab_mass, cum = 0, mass = 0, target, run = 0;
              int kept = n, last = 0;
              for (int i = 0; !nucleus_list && i < n; i++)
                total += s_w[i];
              s_beyond = 0;
              if (p.top_p < 1.f)
                {
                  int m = 0;
                  while (m < n && (m == 0 || cum < (double) p.top_p * total))
                    cum += s_w[m++];
                  kept = m;
                  s_beyond = nucleus_list && cum < (double) p.top_p * total;
                }
              if (p.min_p > 0.f)
                {
                  int m = 1;
                  while (m < kept && s_w[m] >= p.min_p)
                    m++;
                  kept = m;
                }
              for (int i = 0; i < kept; i++)
                mass += s_w[i];
              target = draw_u (p) * mass;
              for (last = 0; last < kept - 1; last++)
                {
                  run += s_w[last];
                  if (run > target)
                    break;
                }
              if (!s_beyond)
                tokens[blockIdx.x] = vocab - 1 - (int) (unsigned) (s_keys[last] & 0xffffffffu);
            }
          __syncthreads ();
          if (!s_beyond)   // else the nucleus is longer than the list
            return;
        }
      __syncthreads ();
    }

  // Fast path 2: no top-k, no top-p: the draw in id order over slices.
  if ((p.top_k <= 0 || p.top_k >= vocab) && p.top_p >= 1.f)
    {
      int per = (vocab + kThreads - 1) / kThreads;
      int i0 = min (vocab, threadIdx.x * per), i1 = min (vocab, i0 + per);
      float inv_t = 1.f / p.temperature;
      double sum = 0;
      for (int i = i0; i < i1; i++)
        {
          float w = expf ((l[i] - best) * inv_t);
          if (p.min_p <= 0.f || w >= p.min_p)
            sum += w;
        }
      s_slice[threadIdx.x] = sum;
      __syncthreads ();
      if (threadIdx.x == 0)
        {
          double mass = 0, target, run = 0;
          int owner = kThreads - 1;
          for (int j = 0; j < kThreads; j++)
            mass += s_slice[j];
          target = draw_u (p) * mass;
          for (int j = 0; j < kThreads; j++)
            if (s_slice[j] > 0)
              {
                owner = j;
                if (run + s_slice[j] > target)
                  break;
                run += s_slice[j];
              }
          s_target = target - run;
          s_owner = owner;
        }
      __syncthreads ();
      if (threadIdx.x == s_owner)
        {
          double run = 0, target = s_target;
          int last = i0;
          for (int i = i0; i < i1; i++)
            {
              float w = expf ((l[i] - best) * inv_t);
              if (p.min_p > 0.f && w < p.min_p)
                continue;
              last = i;
              run += w;
              if (run > target)
                break;
            }
          tokens[blockIdx.x] = last;
        }
      return;
    }

  r.logits = l;
  r.vocab = vocab;
  r.low_digits = 1;
  while (r.low_digits < 4 && (vocab - 1) >> (8 * r.low_digits))
    r.low_digits++;
  r.max = best;
  r.inv_t = 1.f / p.temperature;
  r.min_p = 0.f;
  r.lower = 0;
  __syncthreads ();

  if (p.top_k > 0 && p.top_k < vocab)
    r.lower = select (r, true, (double) p.top_k, false, hist, &s_choice, &s_above);
  if (p.top_p < 1.f)
    {
      double total = kept_mass (r, red);
      r.lower = select (r, false, (double) p.top_p * total, false, hist, &s_choice, &s_above);
    }
  r.min_p = p.min_p;
  {
    double mass = kept_mass (r, red);
    curandStatePhilox4_32_10_t st;
    uint4 bits;
    double u;
    unsigned long long key;

    curand_init (p.seed, p.step, 0, &st);
    bits = curand4 (&st);
    u = ((double) (bits.x >> 5) * 67108864.0 + (double) (bits.y >> 6)) / 9007199254740992.0;
    key = select (r, false, u * mass, true, hist, &s_choice, &s_above);
    if (threadIdx.x == 0)
      tokens[blockIdx.x] = vocab - 1 - (int) (unsigned) (key & 0xffffffffu);
  }
}

__global__ void
counts_add_kernel (uint32_t *__restrict__ counts, const uint32_t *__restrict__ entries, int n)
{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    {
      uint32_t e = entries[i], id = e & ~DCPK_COUNT_SEEN;

      if (e & DCPK_COUNT_SEEN)
        atomicAdd (&counts[id], 1u);
      atomicOr (&counts[id], DCPK_COUNT_SEEN);
    }
}

/* Row blockIdx.y: a token whose bit is clear in the row's mask gets -inf. */
__global__ void
allowed_mask_kernel (float *__restrict__ logits, int vocab, const uint32_t *const *__restrict__ masks)
{
  const uint32_t *mask = masks[blockIdx.y];
  float *row = logits + (size_t) blockIdx.y * vocab;

  if (mask == nullptr)
    return;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x)
    if (!((mask[i >> 5] >> (i & 31)) & 1u))
      row[i] = -INFINITY;
}

} // namespace

extern "C" int
dcpk_apply_allowed_mask (float *d_logits, int n_rows, int vocab, const uint32_t *const *d_masks,
                         void *stream)
{
  if (n_rows < 0 || vocab <= 0 || !d_logits || !d_masks)
    return (int) cudaErrorInvalidValue;
  if (n_rows == 0)
    return 0;
  allowed_mask_kernel<<<dim3 ((vocab + 255) / 256 < 64 ? (vocab + 255) / 256 : 64, n_rows), 256, 0,
                        (cudaStream_t) stream>>> (d_logits, vocab, d_masks);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_token_counts_add (uint32_t *d_counts, const uint32_t *d_entries, int n, void *stream)
{
  if (n < 0 || !d_counts || (n > 0 && !d_entries))
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  counts_add_kernel<<<(n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024, 256, 0,
                      (cudaStream_t) stream>>> (d_counts, d_entries, n);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_sample (float *d_logits, int n_rows, int vocab, const DcpkSampleParams *d_params,
             const uint32_t *const *d_counts, int32_t *d_tokens, void *stream)
{
  if (n_rows < 0 || vocab <= 0 || !d_logits || !d_params || !d_tokens)
    return (int) cudaErrorInvalidValue;
  if (n_rows == 0)
    return 0;
  sample_kernel<<<n_rows, kThreads, 0, (cudaStream_t) stream>>> (d_logits, vocab, d_params,
                                                                  d_counts, d_tokens);
  DCPK_TRY_LAUNCH ();
  return 0;
}
