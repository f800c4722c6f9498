/* SPDX-License-Identifier: MIT */
/* The tier store: blobs round-trip through RAM and disk unchanged, budgets and counters add up,
 * a custom allocator is used for RAM, and a damaged, truncated, swapped or missing disk file is
 * refused (CORRUPT_FILE, IO), deleted and counted. Disk work runs on the worker: with a slow
 * disk, moves and fetches return at once, the RAM of a blob being written counts until the
 * write ends, and keys removed while their read or write runs leave nothing behind. The tiers
 * carry the names the engine's interfaces show. */
#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "dcp-tier-store.h"

static guint8 *
random_blob (GRand *rand, gsize size)
{
  guint8 *b = g_malloc (size);

  for (gsize i = 0; i < size; i++)
    b[i] = g_rand_int (rand);
  return b;
}

static gsize allocated;

static gpointer
counting_alloc (gsize size, gpointer user_data)
{
  allocated += size;
  return g_malloc (size);
}

static void
counting_free (gpointer mem, gsize size, gpointer user_data)
{
  allocated -= size;
  g_free (mem);
}

static void
test_round_trip (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  g_autofree char *dir = g_dir_make_tmp ("dcp-tier-XXXXXX", NULL);
  DcpHostAllocator alloc = { .alloc = counting_alloc, .free = counting_free };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTierStore) store = dcp_tier_store_new (1000, 5000, dir, &alloc, &error);
  g_autofree guint8 *a = random_blob (rand, 300);
  g_autofree guint8 *b = random_blob (rand, 500);
  g_autoptr(GBytes) got = NULL;
  DcpTierStats stats;
  DcpTier tier;
  gsize size;

  g_assert_no_error (error);
  dcp_tier_store_put_ram (store, 1, a, 300);
  dcp_tier_store_put_ram (store, 2, b, 500);
  g_assert_cmpuint (allocated, ==, 800);
  g_assert_cmpuint (dcp_tier_store_get_free (store, DCP_TIER_RAM), ==, 200);
  g_assert_true (dcp_tier_store_move_to_disk (store, 2, &error));
  g_assert_no_error (error);
  dcp_tier_store_wait (store);
  g_assert_cmpuint (allocated, ==, 300);
  g_assert_true (dcp_tier_store_lookup (store, 2, &tier, &size));
  g_assert_cmpint (tier, ==, DCP_TIER_DISK);
  g_assert_cmpuint (size, ==, 500);
  g_assert_cmpuint (dcp_tier_store_get_free (store, DCP_TIER_DISK), ==, 4500);

  got = dcp_tier_store_get (store, 2, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (got, NULL), g_bytes_get_size (got), b, 500);
  g_clear_pointer (&got, g_bytes_unref);
  got = dcp_tier_store_get (store, 1, &error);
  g_assert_cmpmem (g_bytes_get_data (got, NULL), g_bytes_get_size (got), a, 300);
  /* Without a copy: the RAM blob itself; nothing for a blob only on disk. */
  {
    gsize n = 0;
    const guint8 *p = dcp_tier_store_peek (store, 1, &n);

    g_assert_cmpmem (p, n, a, 300);
    p = dcp_tier_store_peek (store, 2, &n);   /* read back by the get above */
    g_assert_cmpmem (p, n, b, 500);
    dcp_tier_store_unstage (store, 2);
    g_assert_null (dcp_tier_store_peek (store, 2, &n));
  }

  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.bytes_to_ram, ==, 800);
  g_assert_cmpuint (stats.bytes_to_disk, ==, 500);
  g_assert_cmpuint (stats.bytes_from_disk, ==, 500);
  g_assert_cmpuint (stats.bytes_from_ram, ==, 1100);
  g_assert_cmpuint (stats.ram_items, ==, 1);
  g_assert_cmpuint (stats.disk_items, ==, 1);

  dcp_tier_store_remove (store, 1);
  dcp_tier_store_remove (store, 2);
  g_assert_cmpuint (allocated, ==, 0);
  g_assert_false (dcp_tier_store_lookup (store, 2, NULL, NULL));
  g_assert_null (dcp_tier_store_get (store, 2, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
  g_clear_pointer (&store, dcp_tier_store_free);
  g_assert_cmpint (g_rmdir (dir), ==, 0);   /* nothing left behind */
}

/* Damages key 1's file with `how` and checks it is refused and dropped. */
static void
check_damage (int how)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (11 + how);
  g_autofree char *dir = g_dir_make_tmp ("dcp-tier-XXXXXX", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTierStore) store = dcp_tier_store_new (1 << 20, 1 << 20, dir, NULL, &error);
  g_autofree guint8 *a = random_blob (rand, 4000);
  g_autofree guint8 *b = random_blob (rand, 4000);
  g_autofree char *path = NULL, *path2 = NULL, *contents = NULL;
  gsize len;
  DcpTierStats stats;

  dcp_tier_store_put_ram (store, 1, a, 4000);
  /* Taken without a copy (g_malloc allocator): the same bytes come back. */
  dcp_tier_store_put_ram_take (store, 2, g_byte_array_append (g_byte_array_new (), b, 4000));
  {
    g_autoptr(GBytes) back = dcp_tier_store_get (store, 2, &error);

    g_assert_cmpmem (g_bytes_get_data (back, NULL), g_bytes_get_size (back), b, 4000);
  }
  g_assert_true (dcp_tier_store_move_to_disk (store, 1, &error));
  g_assert_true (dcp_tier_store_move_to_disk (store, 2, &error));
  dcp_tier_store_wait (store);
  path = dcp_tier_store_get_path (store, 1);
  path2 = dcp_tier_store_get_path (store, 2);
  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  if (how == 0)
    contents[len - 1 - g_rand_int_range (rand, 0, 4000)] ^= 0x10;   /* one bit of the data */
  else if (how == 1)
    len -= 7;                                                           /* truncated */
  else if (how == 2)
    {
      g_free (contents);                                               /* another key's file */
      g_assert_true (g_file_get_contents (path2, &contents, &len, NULL));
    }
  if (how < 3)
    g_assert_true (g_file_set_contents (path, contents, len, NULL));
  else
    g_assert_cmpint (g_unlink (path), ==, 0);                         /* gone */

  g_assert_null (dcp_tier_store_get (store, 1, &error));
  g_assert_error (error, DCP_ERROR, (how < 3 ? DCP_ERROR_CORRUPT_FILE : DCP_ERROR_IO));
  g_assert_false (dcp_tier_store_lookup (store, 1, NULL, NULL));
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.corrupt_files, ==, how < 3 ? 1 : 0);
  g_assert_cmpuint (stats.disk_items, ==, 1);
  dcp_tier_store_remove (store, 2);
  g_clear_pointer (&store, dcp_tier_store_free);
  g_rmdir (dir);
}

static void
test_damaged (void)
{
  for (int how = 0; how < 4; how++)
    check_damage (how);
}

/* A slow disk: the calls return at once and the worker finishes later. */
static void
test_async (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);
  g_autofree char *dir = g_dir_make_tmp ("dcp-tier-XXXXXX", NULL);
  DcpHostAllocator alloc = { .alloc = counting_alloc, .free = counting_free };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTierStore) store = dcp_tier_store_new (10000, 10000, dir, &alloc, &error);
  g_autofree guint8 *a = random_blob (rand, 3000);
  g_autofree guint8 *b = random_blob (rand, 2000);
  g_autoptr(GBytes) got = NULL;
  DcpTierStats stats;
  gint64 t0;

  g_assert_no_error (error);
  dcp_tier_store_set_io_delay (store, 200 * G_TIME_SPAN_MILLISECOND);
  dcp_tier_store_put_ram (store, 1, a, 3000);
  dcp_tier_store_put_ram (store, 2, b, 2000);
  t0 = g_get_monotonic_time ();
  g_assert_true (dcp_tier_store_move_to_disk (store, 1, &error));
  g_assert_true (dcp_tier_store_move_to_disk (store, 2, &error));
  /* Still in RAM while written: counted there, and ready at once. */
  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.ram_bytes, ==, 5000);
  g_assert_cmpuint (stats.ram_writing, ==, 5000);
  g_assert_cmpuint (stats.disk_bytes, ==, 5000);
  g_assert_cmpuint (dcp_tier_store_get_free (store, DCP_TIER_RAM), ==, 5000);
  g_assert_cmpint (dcp_tier_store_fetch (store, 1, &error), ==, DCP_TIER_FETCH_READY);
  /* Removed while its write runs: nothing is left once the worker is done. */
  dcp_tier_store_remove (store, 2);
  g_assert_cmpint (g_get_monotonic_time () - t0, <, 100 * G_TIME_SPAN_MILLISECOND);
  dcp_tier_store_wait (store);
  g_assert_cmpuint (allocated, ==, 0);
  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.ram_bytes + stats.ram_writing + stats.ram_items, ==, 0);
  g_assert_cmpuint (stats.disk_bytes, ==, 3000);

  /* A read: pending, then staged; a second read removed in flight. */
  t0 = g_get_monotonic_time ();
  g_assert_cmpint (dcp_tier_store_fetch (store, 1, &error), ==, DCP_TIER_FETCH_PENDING);
  g_assert_cmpint (dcp_tier_store_fetch (store, 1, &error), ==, DCP_TIER_FETCH_PENDING);
  g_assert_cmpuint (dcp_tier_store_poll (store), ==, 0);
  g_assert_cmpint (g_get_monotonic_time () - t0, <, 100 * G_TIME_SPAN_MILLISECOND);
  while (dcp_tier_store_poll (store) == 0)
    g_usleep (1000);
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, 200 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpint (dcp_tier_store_fetch (store, 1, &error), ==, DCP_TIER_FETCH_READY);
  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.staged_bytes, ==, 3000);
  got = dcp_tier_store_get (store, 1, &error);
  g_assert_cmpmem (g_bytes_get_data (got, NULL), g_bytes_get_size (got), a, 3000);
  /* Unstaged: the RAM goes, the blob stays on disk and can be fetched again. */
  dcp_tier_store_unstage (store, 1);
  g_assert_cmpuint (allocated, ==, 0);
  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.staged_bytes, ==, 0);
  g_assert_cmpuint (stats.disk_bytes, ==, 3000);
  g_assert_cmpint (dcp_tier_store_fetch (store, 1, &error), ==, DCP_TIER_FETCH_PENDING);
  dcp_tier_store_wait (store);
  g_assert_cmpint (dcp_tier_store_fetch (store, 1, &error), ==, DCP_TIER_FETCH_READY);
  dcp_tier_store_remove (store, 1);
  g_assert_cmpuint (allocated, ==, 0);

  dcp_tier_store_put_ram (store, 3, b, 2000);
  g_assert_true (dcp_tier_store_move_to_disk (store, 3, &error));
  dcp_tier_store_wait (store);
  g_assert_cmpint (dcp_tier_store_fetch (store, 3, &error), ==, DCP_TIER_FETCH_PENDING);
  dcp_tier_store_remove (store, 3);
  dcp_tier_store_wait (store);
  g_assert_cmpuint (allocated, ==, 0);
  dcp_tier_store_get_stats (store, &stats);
  g_assert_cmpuint (stats.disk_bytes + stats.disk_items + stats.staged_bytes, ==, 0);
  g_clear_pointer (&store, dcp_tier_store_free);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

/* The one DcpTier and the names the D-Bus Conversations list and GET /stats show. */
static void
test_tier_names (void)
{
  g_assert_cmpint (DCP_TIER_DEVICE, <, DCP_TIER_RAM);
  g_assert_cmpint (DCP_TIER_RAM, <, DCP_TIER_DISK);
  g_assert_cmpstr (dcp_tier_to_string (DCP_TIER_DEVICE), ==, "vram");
  g_assert_cmpstr (dcp_tier_to_string (DCP_TIER_RAM), ==, "ram");
  g_assert_cmpstr (dcp_tier_to_string (DCP_TIER_DISK), ==, "disk");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tier-store/round-trip", test_round_trip);
  g_test_add_func ("/tier-store/damaged", test_damaged);
  g_test_add_func ("/tier-store/async", test_async);
  g_test_add_func ("/tier-store/tier-names", test_tier_names);
  return g_test_run ();
}
