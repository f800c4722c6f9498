/* SPDX-License-Identifier: MIT */
/* Helpers shared by the GPU tests (static inline: each test uses a subset). */
#pragma once

#include <math.h>

#include <glib.h>

#include "dcp-kernels.h"

#define CHECK_CUDA(call) g_assert_cmpint ((call), ==, 0)

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
