/* SPDX-License-Identifier: MIT */
/* The checksum kernel (the bandwidth probe's read loop) against its C reference, on random data. */
#include "config.h"

#include <glib.h>

#include "dcp-kernels.h"

#define CHECK_CUDA(call) g_assert_cmpint ((call), ==, 0)

static void
check_size (gsize bytes)
{
  g_autofree guint32 *host = g_malloc (bytes);
  void *dev = NULL;
  guint64 got = 0;

  for (gsize i = 0; i < bytes / 4; i++)
    host[i] = g_random_int ();
  CHECK_CUDA (dcpk_malloc (&dev, bytes));
  CHECK_CUDA (dcpk_memcpy_h2d (dev, host, bytes));
  CHECK_CUDA (dcpk_checksum (dev, bytes, &got));
  CHECK_CUDA (dcpk_free (dev));
  g_assert_cmphex (got, ==, dcpk_checksum_ref (host, bytes));
}

static void
test_checksum_sizes (void)
{
  /* Sizes that hit the unrolled loop, its tail, and less than one vector per thread. */
  static const gsize sizes[] = { 16, 48, 4096, 65536 + 16, 3 << 20, (64 << 20) + 4080 };

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    check_size (sizes[i]);
}

static void
test_checksum_rejects_unaligned (void)
{
  void *dev = NULL;
  guint64 sum = 0;

  CHECK_CUDA (dcpk_malloc (&dev, 64));
  g_assert_cmpint (dcpk_checksum (dev, 40, &sum), !=, 0);
  g_assert_cmpint (dcpk_checksum ((char *) dev + 8, 32, &sum), !=, 0);
  CHECK_CUDA (dcpk_free (dev));
}

static void
test_bandwidth_probe_runs (void)
{
  double gbps = 0;

  CHECK_CUDA (dcpk_bandwidth_probe (256 << 20, 3, &gbps));
  g_assert_cmpfloat (gbps, >, 0);
}

int
main (int argc, char **argv)
{
  int count = 0;

  g_test_init (&argc, &argv, NULL);
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      g_print ("no CUDA device: skipped\n");
      return 77;
    }
  g_test_add_func ("/gpu/checksum/sizes", test_checksum_sizes);
  g_test_add_func ("/gpu/checksum/rejects-unaligned", test_checksum_rejects_unaligned);
  g_test_add_func ("/gpu/bandwidth-probe", test_bandwidth_probe_runs);
  return g_test_run ();
}
