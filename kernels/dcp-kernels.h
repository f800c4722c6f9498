/* SPDX-License-Identifier: MIT */
/*
 * The C API of libdcp-kernels: every CUDA kernel of Decapybara is reached through a launcher
 * declared here. Launchers return a cudaError_t as int (0 = success) after checking the launch;
 * they never abort. Pointers named d_* are device memory, h_* host memory.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device facts (device.cu) ---- */

typedef struct {
  char name[256];
  int cc_major, cc_minor;       /* compute capability */
  int sm_count;
  size_t total_bytes, free_bytes;
  double peak_gbps;             /* memory bus width × clock × 2 (DDR), from the driver */
  int driver_version, runtime_version;
} DcpkDeviceInfo;

/* Number of CUDA devices in *count; 0 with success when there is no driver or no device. */
int dcpk_device_count (int *count);
int dcpk_device_info (int device, DcpkDeviceInfo *info);
/* Name of a cudaError_t, for messages. */
const char *dcpk_error_name (int error);
const char *dcpk_error_string (int error);

/* ---- memory (device.cu) ---- */

int dcpk_malloc (void **d_ptr, size_t bytes);
int dcpk_free (void *d_ptr);
int dcpk_memcpy_h2d (void *d_dst, const void *h_src, size_t bytes);
int dcpk_memcpy_d2h (void *h_dst, const void *d_src, size_t bytes);
int dcpk_synchronize (void);

/* ---- checksum and bandwidth probe (checksum.cu) ---- */

/* Sum of the buffer's little-endian 64-bit words modulo 2^64; bytes must be a multiple of 16 and
 * d_data 16-byte aligned. Reads with 16-byte loads at full memory bandwidth, so it doubles as
 * the VRAM checksum pass over the weights. The C reference is dcpk_checksum_ref. */
int dcpk_checksum (const void *d_data, size_t bytes, uint64_t *h_sum);
uint64_t dcpk_checksum_ref (const void *h_data, size_t bytes);

/* Reads a fresh buffer of `bytes` `iterations` times after a warm-up and reports the median
 * read bandwidth in GB/s (10^9 bytes per second). */
int dcpk_bandwidth_probe (size_t bytes, int iterations, double *gbps);

/* ---- decode GEMV (gemv.cu) ---- */

/* Weight formats of dcpk_gemv. BF16: n_rows x k_cols row-major. MX: the planar layout of
 * engine/model/dcp-quant.h (element plane of 32-element blocks, a row's last block zero-padded,
 * then the E8M0 scale plane at the next multiple of 16 bytes). */
typedef enum {
  DCPK_FORMAT_BF16,
  DCPK_FORMAT_MXFP8_E4M3,
  DCPK_FORMAT_MXFP6_E2M3,
  DCPK_FORMAT_MXFP6_E3M2,
  DCPK_FORMAT_MXFP4_E2M1,
} DcpkFormat;

#define DCPK_GEMV_MAX_BATCH 16

/* Bytes of an n_rows x k_cols weight in `format` (as dcp_quant_tensor_bytes); 0 when unknown. */
size_t dcpk_weight_bytes (DcpkFormat format, int n_rows, int k_cols);

/* y[b, n] = sum_k W[n, k] x[b, k] for b < batch (1..DCPK_GEMV_MAX_BATCH): d_x is batch x k_cols
 * FP32, d_y batch x n_rows FP32, both row-major; d_weight 16-byte aligned. The weights are read
 * once per call; FP32 accumulation, products as exact as FP32 ones (the tensor-core kernel
 * carries x as two BF16 terms; split-K launches add into a zeroed d_y). `stream` is a
 * cudaStream_t (NULL: the default stream). */
int dcpk_gemv (DcpkFormat format, const void *d_weight, int n_rows, int k_cols, const float *d_x,
               int batch, float *d_y, void *stream);

/* The kernel family of a GEMV: AUTO is dcpk_gemv's choice per format and batch; the others force
 * one (tests and benchmarks). BF16 rows that are not 16-byte aligned always take the CUDA cores. */
typedef enum { DCPK_GEMV_AUTO, DCPK_GEMV_CUDA_CORES, DCPK_GEMV_TENSOR_CORES } DcpkGemvPath;
int dcpk_gemv_on (DcpkGemvPath path, DcpkFormat format, const void *d_weight, int n_rows,
                  int k_cols, const float *d_x, int batch, float *d_y, void *stream);

/* ---- Gated DeltaNet decode step (gdn-decode.cu) ---- */

/* One GDN layer's dimensions (the 27B: 16, 48, 128, 128, 4, 1e-6). */
typedef struct {
  int n_k_heads, n_v_heads;        /* H_k, H_v (H_v a multiple of H_k) */
  int k_head_dim, v_head_dim;      /* d_k, d_v (d_k <= 256, d_v <= 512) */
  int conv_width;                  /* K of the causal conv */
  float eps;                       /* of the L2 norms and the gated RMSNorm */
} DcpkGdnShape;

/* One GDN layer's small weights, device memory. */
typedef struct {
  const uint16_t *conv_weight;     /* BF16 [conv_dim, K], conv_dim = 2 H_k d_k + H_v d_v */
  const float *a_log, *dt_bias;    /* [H_v] */
  const float *norm_weight;        /* [d_v], plain w */
} DcpkGdnWeights;

/* The decode step of MODEL.md §2.3 steps 2-8 for n_seqs sequences, one token each:
 * d_qkv [n_seqs, conv_dim] (overwritten with silu (conv (qkv))), d_z [n_seqs, H_v d_v],
 * d_b, d_a [n_seqs, H_v], all FP32; d_conv_states and d_states are device arrays of n_seqs
 * device pointers to a sequence's conv state [K - 1, conv_dim] FP32 (oldest first) and
 * recurrent state [H_v, d_k, d_v] FP32, both updated in place (16-byte aligned recurrent states
 * are read and written faster). d_out [n_seqs, H_v d_v] FP32 gets the gated-RMSNormed output
 * (the input of out_proj). Needs thread block clusters (sm_90 and later). */
int dcpk_gdn_decode (const DcpkGdnShape *shape, const DcpkGdnWeights *weights, int n_seqs,
                     float *d_qkv, const float *d_z, const float *d_b, const float *d_a,
                     float *const *d_conv_states, float *const *d_states, float *d_out,
                     void *stream);

/* ---- RMSNorm (rmsnorm.cu) ---- */

/* Zero-centred RMSNorm y = x / sqrt(mean(x²) + eps) · (1 + w) over n_rows rows of width FP32
 * values, w BF16 [width]. With d_add (may be NULL) the residual add is fused first:
 * d_resid += d_add, written back; then d_out = norm(d_resid). d_out may equal d_add, not d_resid. */
int dcpk_add_rms_norm (float *d_resid, const float *d_add, const uint16_t *d_weight, int n_rows,
                       int width, float eps, float *d_out, void *stream);

/* The per-head q/k norm, in place: head (r, h) is the head_dim floats at
 * d_x + r·row_stride + h·head_stride (strides in floats), w BF16 [head_dim]. */
int dcpk_head_rms_norm (float *d_x, int n_rows, int n_heads, long row_stride, long head_stride,
                        int head_dim, const uint16_t *d_weight, float eps, void *stream);

/* Plain RMSNorm (Qwen3's, the DFlash drafter's): n_segs segments of width FP32 values, segment i at d_x + i·width;
 * with d_add (may be NULL) the residual add first, d_x += d_add written back; then
 * d_out = x / sqrt(mean(x²) + eps) · w, w FP32 [width]. d_out may be d_x (the per-head q/k
 * norm in place: width head_dim, a segment per head). */
int dcpk_plain_rms_norm (float *d_x, const float *d_add, const float *d_weight, int n_segs,
                         int width, float eps, float *d_out, void *stream);

/* ---- rotary embedding (rope.cu) ---- */

/* NeoX rotate-half RoPE over the first rotary_dim (even, <= 512) dims of every head, in place,
 * heads addressed like dcpk_head_rms_norm; d_positions: int32 [n_rows], one per token.
 * inv_freq: the host's table of rotary_dim / 2 inverse frequencies (default RoPE or YaRN,
 * engine/model/dcp-rope.h), passed with the launch; cos and sin are scaled by attention_factor. */
int dcpk_rope (float *d_x, int n_rows, int n_heads, long row_stride, long head_stride,
               int rotary_dim, const float *inv_freq, float attention_factor,
               const int32_t *d_positions, void *stream);
/* The same with mRoPE (the language model's positions of a prompt with images): d_positions holds
 * three rows, T, H and W, pos_stride (>= n_rows) int32 apart; sections [3] the T, H, W pair
 * counts, interleaved as engine/backend/dcp-cpu-ops.h's dcp_cpu_rope_3d. sections NULL: T only
 * (dcpk_rope). */
int dcpk_rope_3d (float *d_x, int n_rows, int n_heads, long row_stride, long head_stride,
                  int rotary_dim, const float *inv_freq, float attention_factor,
                  const int *sections, const int32_t *d_positions, long pos_stride, void *stream);

/* ---- MLP activation and embedding (swiglu.cu, embed.cu) ---- */

/* d_out[r, i] = silu(g) · u for the fused GEMV output d_gate_up [n_rows, 2·width] = [gate | up]. */
int dcpk_swiglu (const float *d_gate_up, int n_rows, int width, float *d_out, void *stream);

/* d_out [n_tokens, width] FP32 = rows d_tokens[t] of the BF16 table [vocab, width] (width even);
 * an id outside [0, vocab) gives zeros. */
int dcpk_embed (const uint16_t *d_table, int vocab, int width, const int32_t *d_tokens,
                int n_tokens, float *d_out, void *stream);

/* ---- paged KV cache and decode attention (kv-append.cu, attention-decode.cu) ---- */

#define DCPK_KV_PAGE_TOKENS 512

/* KV cache formats: BF16, or MX (8-bit E4M3, 6-bit E2M3 / E3M2, 4-bit E2M1 with one E8M0
 * scale per 32 values). K and V may differ. */
typedef struct {
  int n_kv_heads, head_dim;        /* head_dim a multiple of 32, <= 256 */
  DcpkFormat k_format, v_format;
} DcpkKvLayout;

/* Bytes of one page of one layer: [K block | V block], each n_kv_heads x 512 tokens; a BF16
 * block is [kv_head][512][head_dim] BF16; an MX block is [kv_head][512] token rows of the
 * element bytes (head_dim · bits / 8) followed by [kv_head][512][head_dim / 32] E8M0 scales
 * (see docs/KERNELS.md). 0 for a bad layout. A layer's pages are consecutive at this stride. */
size_t dcpk_kv_page_bytes (const DcpkKvLayout *layout);

/* Writes n_tokens tokens' k and v (FP32 [n_tokens, n_kv_heads, head_dim], after norm and RoPE)
 * into the pages of one layer at d_pages, token t at slot d_slots[t] = page · 512 + offset,
 * quantizing to the layout's formats (round to nearest even, E8M0 scale from the block's
 * largest magnitude as engine/model/dcp-quant.c). A negative slot is skipped. */
int dcpk_kv_append (const DcpkKvLayout *layout, void *d_pages, const float *d_k, const float *d_v,
                    const int32_t *d_slots, int n_tokens, void *stream);

/* Decode attention of one layer over paged KV (FlashInfer's CSR contract) for n_seqs sequences:
 * sequence s owns pages d_page_indices[d_page_indptr[s] .. d_page_indptr[s+1]), its last page
 * holding d_last_page_len[s] (1..512) tokens, so kv_len = 512 (pages - 1) + last_page_len.
 * Its query tokens are rows d_q_indptr[s] .. d_q_indptr[s+1] of d_qg (d_q_indptr NULL: one row
 * per sequence, row s), at most DCPK_ATTN_MAX_QUERIES each and already appended to the cache:
 * query j of n sits at position kv_len - n + j and sees keys 0 .. kv_len - n + j (causal).
 * d_qg: [rows, n_heads, 2 · head_dim] FP32, per head [q | gate] (q after norm and RoPE).
 * d_out: [rows, n_heads · head_dim] FP32 = softmax(q·Kᵀ · scale) V ⊙ sigmoid(gate).
 * Query head h reads kv head h / (n_heads / n_kv_heads). head_dim 64, 128 or 256 (256 when K or
 * V is MX). max_kv_len bounds every kv_len (it sizes the split over the sequence); d_workspace
 * holds dcpk_attention_workspace_bytes. */
#define DCPK_ATTN_MAX_QUERIES 8

size_t dcpk_attention_workspace_bytes (const DcpkKvLayout *layout, int n_heads, int n_rows,
                                       int max_kv_len);
int dcpk_attention_decode (const DcpkKvLayout *layout, int n_heads, float scale,
                           const void *d_pages, const int32_t *d_page_indptr,
                           const int32_t *d_page_indices, const int32_t *d_last_page_len,
                           int n_seqs, const int32_t *d_q_indptr, int n_rows, int max_kv_len,
                           const float *d_qg, float *d_out, void *d_workspace, void *stream);

/* ---- sampling (sample.cu) ---- */

/* One row's sampling parameters (engine/runtime/dcp-sampler.h has the meanings). */
typedef struct {
  float temperature;          /* 0: greedy, lowest id on ties */
  int top_k;                  /* 0: off */
  float top_p;                /* 1: off */
  float min_p;                /* 0: off */
  float presence_penalty, frequency_penalty, repetition_penalty;
  uint32_t pad;
  uint64_t seed;              /* with the step: the Philox stream of the draw */
  uint64_t step;
} DcpkSampleParams;

/* Samples one token per logit row: d_logits [n_rows, vocab] FP32, overwritten with the
 * penalised logits; d_params [n_rows]; d_counts: device array of n_rows device pointers (an
 * entry, or the array, may be NULL: no penalties) to a sequence's uint32 [vocab] token table,
 * bits 0-30 the times the token was generated, bit 31 set when it is in the prompt or was
 * generated. d_tokens [n_rows] int32 gets the ids. Same order of operations as dcp-sampler.c;
 * the draw u in [0, 1) comes from Philox4_32_10 (seed, subsequence step). */
#define DCPK_COUNT_SEEN 0x80000000u

int dcpk_sample (float *d_logits, int n_rows, int vocab, const DcpkSampleParams *d_params,
                 const uint32_t *const *d_counts, int32_t *d_tokens, void *stream);

/* Before dcpk_sample: in each row r of d_logits [n_rows, vocab], the tokens whose bit is clear in
 * d_masks[r] (a device pointer to (vocab + 31) / 32 words, bit id % 32 of word id / 32: a
 * grammar's allowed tokens) get -inf; a NULL entry leaves its row untouched. */
int dcpk_apply_allowed_mask (float *d_logits, int n_rows, int vocab, const uint32_t *const *d_masks,
                             void *stream);

/* Adds n tokens to a token table of dcpk_sample: d_entries [n] are token ids, with
 * DCPK_COUNT_SEEN set for a generated token (counted and marked seen) and clear for a prompt
 * token (marked seen only). */
int dcpk_token_counts_add (uint32_t *d_counts, const uint32_t *d_entries, int n, void *stream);

/* ---- CUDA backend helpers (cuda-backend-ops.cu) ---- */

/* A non-blocking stream of its own (no implicit sync with the legacy default stream). */
int dcpk_stream_create (void **stream);
int dcpk_stream_destroy (void *stream);
int dcpk_stream_synchronize (void *stream);
int dcpk_memcpy_h2d_async (void *d_dst, const void *h_src, size_t bytes, void *stream);
int dcpk_memcpy_d2h_async (void *h_dst, const void *d_src, size_t bytes, void *stream);
int dcpk_memcpy_d2d_async (void *d_dst, const void *d_src, size_t bytes, void *stream);
/* height rows of width_bytes from d_src (rows src_pitch bytes apart) to d_dst (dst_pitch). */
int dcpk_memcpy2d_d2d_async (void *d_dst, size_t dst_pitch, const void *d_src, size_t src_pitch,
                             size_t width_bytes, size_t height, void *stream);
/* The same from the device into host memory (h_dst). */
int dcpk_memcpy2d_d2h_async (void *h_dst, size_t dst_pitch, const void *d_src, size_t src_pitch,
                             size_t width_bytes, size_t height, void *stream);
int dcpk_memset_async (void *d_dst, int value, size_t bytes, void *stream);
/* Page-locked host memory (fast, asynchronous device-to-host copies). */
int dcpk_malloc_host (void **h_ptr, size_t bytes);
int dcpk_free_host (void *h_ptr);

/* Random fills (benchmark models made in VRAM), on the default stream; the same seed gives the
 * same bytes. Bytes: each random byte ANDed with mask. BF16 / FP32: uniform in [lo, hi). */
int dcpk_fill_random_bytes (void *d_dst, size_t bytes, uint8_t mask, uint64_t seed);
int dcpk_fill_random_bf16 (uint16_t *d_dst, size_t n, float lo, float hi, uint64_t seed);
int dcpk_fill_random_f32 (float *d_dst, size_t n, float lo, float hi, uint64_t seed);

/* ---- decode attention for other head sizes (attention-decode-simple.cu) ---- */

/* Decode attention as dcpk_attention_decode with one query row per sequence (d_q_indptr NULL),
 * BF16 K and V, for any head_dim that dcpk_kv_page_bytes takes (a multiple of 32, <= 256):
 * the CUDA backend's fallback for the head sizes dcpk_attention_decode does not read (the
 * odd-sizes test model's 32). One block per (head, sequence); no workspace. */
int dcpk_attention_decode_simple (const DcpkKvLayout *layout, int n_heads, float scale,
                                  const void *d_pages, const int32_t *d_page_indptr,
                                  const int32_t *d_page_indices, const int32_t *d_last_page_len,
                                  int n_seqs, const float *d_qg, float *d_out, void *stream);

/* ---- the DFlash drafter (dflash.cu) ---- */

/* d_x[i] *= scale for i < n. */
int dcpk_scale (float *d_x, size_t n, float scale, void *stream);

/* Attention without a mask: every query row sees every key. d_q [n_q, n_heads, head_dim],
 * d_k and d_v [n_keys, n_kv_heads, head_dim], d_out [n_q, n_heads, head_dim], all FP32;
 * query head h reads kv head h / (n_heads / n_kv_heads); out = softmax(q·Kᵀ · scale) V.
 * head_dim <= 256, n_heads a multiple of n_kv_heads, any n_q and n_keys > 0; d_workspace holds
 * dcpk_attention_full_workspace_bytes (0: a shape it does not take), which grows with n_keys
 * up to ~512 ranges of keys' partial results. */
size_t dcpk_attention_full_workspace_bytes (int n_heads, int n_kv_heads, int head_dim, int n_q,
                                            int n_keys);
int dcpk_attention_full (int n_heads, int n_kv_heads, int head_dim, float scale,
                         const float *d_q, int n_q, const float *d_k, const float *d_v,
                         int n_keys, float *d_out, void *d_workspace, void *stream);

/* Per row of d_logits [n_rows, vocab]: l ← l · multiplier, then l ← c · tanh(l / c) when
 * softcap c > 0 (written back); d_tokens[r] gets the row's argmax (the lowest id on ties) and
 * d_prob[r] its softmax probability 1 / Σ exp(l_i − l_max). */
int dcpk_logits_top1 (float *d_logits, int n_rows, int vocab, float multiplier, float softcap,
                      int32_t *d_tokens, float *d_prob, void *stream);

/* ---- CUDA graphs (graph.cu) ---- */

/* Begin capturing what is enqueued on stream; end it into an executable graph (*exec), or
 * abort it after an error. Launch replays the captured work on stream. */
int dcpk_graph_begin (void *stream);
int dcpk_graph_end (void *stream, void **exec);
void dcpk_graph_abort (void *stream);
int dcpk_graph_launch (void *exec, void *stream);
int dcpk_graph_destroy (void *exec);

/* ---- timing (timing.cu) ---- */

/* Enqueues the work to time on the default stream; returns 0 or a cudaError_t. */
typedef int (*DcpkTimedFn) (void *user);

/* Calls fn `warmup` times untimed, then `samples` times each between two CUDA events, and
 * reports the median in milliseconds. */
int dcpk_time_median (DcpkTimedFn fn, void *user, int warmup, int samples, double *ms);

#ifdef __cplusplus
}
#endif

#include "dcpk-attention-prefill.h"
#include "dcpk-gemm.h"
#include "dcpk-gdn-prefill.h"
#include "dcpk-vision.h"
