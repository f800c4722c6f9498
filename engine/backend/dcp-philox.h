/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Philox4x32-10, the counter-based generator the CUDA sampler draws from (cuRAND's
 * curandStatePhilox4_32_10_t): one block of four words from a 128-bit counter and a 64-bit key. */
void   dcp_philox4x32_10 (const guint32 counter[4],
                          const guint32 key[2],
                          guint32       out[4]);

/* The draw u in [0, 1) (53 bits) for (seed, draw): the first block of the stream that cuRAND's
 * curand_init (seed, draw, 0) starts, so the CPU and the GPU sampler draw the same u. */
double dcp_philox_uniform (guint64 seed,
                           guint64 draw);

G_END_DECLS
