/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The weight checksum of model files: the bytes, zero-padded to a multiple of 16, read as
 * little-endian 64-bit words and summed modulo 2^64. It is the sum the CUDA kernel dcpk_checksum
 * computes over VRAM (its C reference is dcpk_checksum_ref in kernels/checksum.cu), so the engine
 * can check uploaded weights against the file. Being a plain sum, it can be accumulated over
 * pieces in any order, provided each piece starts at a multiple of 8 bytes from the tensor's
 * start: see dcp_checksum_add. */
guint64 dcp_checksum64     (const void *data,
                            gsize       nbytes);
/* Adds the checksum of nbytes at data, which sit `offset` bytes from the start of the checksummed
 * range (offset a multiple of 8), to sum. */
guint64 dcp_checksum_add   (guint64     sum,
                            guint64     offset,
                            const void *data,
                            gsize       nbytes);

G_END_DECLS
