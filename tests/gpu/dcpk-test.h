/* SPDX-License-Identifier: MIT */
/* Helpers shared by the GPU tests (static inline: each test uses a subset). */
#pragma once

#include <math.h>

#include <glib.h>

#include "dcp-dtype.h"
#include "dcp-kernels.h"

#define CHECK_CUDA(call) g_assert_cmpint ((call), ==, 0)

/* Weight formats as bits of a mask, for tables of test cases. */
enum {
  F_BF16 = 1 << DCPK_FORMAT_BF16,
  F_FP8 = 1 << DCPK_FORMAT_MXFP8_E4M3,
  F_E2M3 = 1 << DCPK_FORMAT_MXFP6_E2M3,
  F_E3M2 = 1 << DCPK_FORMAT_MXFP6_E3M2,
  F_FP4 = 1 << DCPK_FORMAT_MXFP4_E2M1,
  F_ALL = F_BF16 | F_FP8 | F_E2M3 | F_E3M2 | F_FP4,
};

/* The engine's dtype of a kernel format (the byte layouts agree: dcp-kernels.h). */
static inline DcpDType
dcpk_test_dtype (DcpkFormat f)
{
  static const DcpDType dtypes[] = {
    [DCPK_FORMAT_BF16] = DCP_DTYPE_BF16,
    [DCPK_FORMAT_MXFP8_E4M3] = DCP_DTYPE_MXFP8_E4M3,
    [DCPK_FORMAT_MXFP6_E2M3] = DCP_DTYPE_MXFP6_E2M3,
    [DCPK_FORMAT_MXFP6_E3M2] = DCP_DTYPE_MXFP6_E3M2,
    [DCPK_FORMAT_MXFP4_E2M1] = DCP_DTYPE_MXFP4_E2M1,
  };
  return dtypes[f];
}

/* Bits per element of a kernel format (MX scales not counted). */
static inline int
dcpk_test_format_bits (DcpkFormat f)
{
  static const int bits[] = { 16, 8, 6, 6, 4 };
  return bits[f];
}

/* A seeded generator in [-1, 1), cheap enough for a 1.27 G-element matrix (splitmix64). */
static inline float
dcpk_test_next_uniform (guint64 *state)
{
  guint64 z = (*state += 0x9e3779b97f4a7c15ull);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float) ((z >> 40) * (1.0 / (1 << 24))) * 2.0f - 1.0f;
}

/* ||got - want|| / ||want|| in double; want must not be all zeros. */
static inline double
dcpk_test_rel_err (const float *got, const float *want, gsize n)
{
  double err = 0, norm = 0;

  for (gsize i = 0; i < n; i++)
    {
      err += ((double) got[i] - want[i]) * ((double) got[i] - want[i]);
      norm += (double) want[i] * want[i];
    }
  g_assert_cmpfloat (norm, >, 0);
  return sqrt (err / norm);
}

static inline void
dcpk_test_fill (GRand *rng, float *v, gsize n, double lo, double hi)
{
  for (gsize i = 0; i < n; i++)
    v[i] = (float) g_rand_double_range (rng, lo, hi);
}

static inline void *
dcpk_test_to_device (const void *h, gsize bytes)
{
  void *d = NULL;

  CHECK_CUDA (dcpk_malloc (&d, MAX (bytes, 16)));
  if (bytes > 0)
    CHECK_CUDA (dcpk_memcpy_h2d (d, h, bytes));
  return d;
}

/* TRUE when a CUDA device is there; the tests that need one are added only then. */
static inline gboolean
dcpk_test_have_gpu (void)
{
  int count = 0;

  return dcpk_device_count (&count) == 0 && count > 0;
}

/* g_test_run, then 77 (skipped) when the GPU cases were left out and the rest passed. */
static inline int
dcpk_test_run (gboolean have_gpu)
{
  int rc = g_test_run ();

  if (rc == 0 && !have_gpu)
    {
      g_print ("no CUDA device: GPU cases skipped\n");
      return 77;
    }
  return rc;
}
