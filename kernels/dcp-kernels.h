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

#ifdef __cplusplus
}
#endif
