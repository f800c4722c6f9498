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
 * FP32, d_y batch x n_rows FP32, both row-major; d_weight 16-byte aligned. FP32 accumulation;
 * the weights are read once per call. `stream` is a cudaStream_t (NULL: the default stream). */
int dcpk_gemv (DcpkFormat format, const void *d_weight, int n_rows, int k_cols, const float *d_x,
               int batch, float *d_y, void *stream);

/* ---- Gated DeltaNet decode step (gdn-decode.cu) ---- */

/* One GDN layer's dimensions (the 27B: 16, 48, 128, 128, 4, 1e-6). */
typedef struct {
  int n_k_heads, n_v_heads;        /* H_k, H_v (H_v a multiple of H_k) */
  int k_head_dim, v_head_dim;      /* d_k, d_v (d_v <= 512, d_k x d_v <= 32768) */
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
 * recurrent state [H_v, d_k, d_v] FP32, both updated in place. d_out [n_seqs, H_v d_v] FP32 gets
 * the gated-RMSNormed output (the input of out_proj). */
int dcpk_gdn_decode (const DcpkGdnShape *shape, const DcpkGdnWeights *weights, int n_seqs,
                     float *d_qkv, const float *d_z, const float *d_b, const float *d_a,
                     float *const *d_conv_states, float *const *d_states, float *d_out,
                     void *stream);

/* ---- timing (timing.cu) ---- */

/* Enqueues the work to time on the default stream; returns 0 or a cudaError_t. */
typedef int (*DcpkTimedFn) (void *user);

/* Calls fn `warmup` times untimed, then `samples` times each between two CUDA events, and
 * reports the median in milliseconds. */
int dcpk_time_median (DcpkTimedFn fn, void *user, int warmup, int samples, double *ms);

#ifdef __cplusplus
}
#endif
