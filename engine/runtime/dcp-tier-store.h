/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-error.h"
#include "dcp-tier.h"

G_BEGIN_DECLS

/* The tiers below the device: idle sequence states, as the bytes the backend saved, in host
 * memory (RAM tier) or in files of a cache folder (disk tier), each tier with a byte budget.
 * Keys are the caller's ids. A disk file carries a header with the blob's size and SHA-256, and
 * is checked when read: a damaged, foreign or missing file is deleted and reported as
 * CORRUPT_FILE or IO (the caller reads the prompt again). RAM comes from an allocator the caller
 * may replace (the CUDA backend hands out pinned memory, so that copies to the device run
 * asynchronously); it may be called from the store's worker thread.
 *
 * Disk work runs on one worker thread, so that the engine thread never waits for the disk:
 * dcp_tier_store_move_to_disk starts a write (checksum and file) and
 * dcp_tier_store_fetch starts a read (file and check); the engine thread applies what the
 * worker finished with dcp_tier_store_poll. A blob being written still holds its RAM, counted
 * in the RAM tier until the write ends (the RAM budget is a hard limit); a blob read back waits
 * in a staging buffer outside the budgets until the caller loads it and removes the key.
 * Everything but the notify callback runs on one thread (the engine thread). */

typedef struct {
  gpointer (*alloc) (gsize size, gpointer user_data);
  void     (*free)  (gpointer mem, gsize size, gpointer user_data);
  gpointer user_data;
} DcpHostAllocator;

typedef struct {
  guint64 ram_bytes, disk_bytes;           /* held now (a blob being written counts in both) */
  guint64 ram_writing;                     /* of ram_bytes: blobs being written to disk */
  guint64 staged_bytes;                    /* read back from disk, waiting to be loaded */
  guint64 ram_items, disk_items;
  guint64 bytes_to_ram, bytes_from_ram;    /* moved in and out of RAM */
  guint64 bytes_to_disk, bytes_from_disk;
  guint64 corrupt_files;                   /* disk files that failed their check */
} DcpTierStats;

typedef struct _DcpTierStore DcpTierStore;

/* disk_dir may be NULL (no disk tier); it is created when missing. allocator NULL: g_malloc. */
DcpTierStore *dcp_tier_store_new        (guint64                 ram_budget,
                                         guint64                 disk_budget,
                                         const char             *disk_dir,
                                         const DcpHostAllocator *allocator,
                                         GError                **error);
void          dcp_tier_store_free       (DcpTierStore           *self);
guint64       dcp_tier_store_get_budget (const DcpTierStore     *self,
                                         DcpTier                 tier);
/* Budget minus what is held (0 when over). */
guint64       dcp_tier_store_get_free   (const DcpTierStore     *self,
                                         DcpTier                 tier);
/* Whether key is held, and where (RAM or disk). */
gboolean      dcp_tier_store_lookup     (const DcpTierStore     *self,
                                         guint64                 key,
                                         DcpTier                *tier,
                                         gsize                  *size);
/* Copies the blob into RAM under key (replacing what key held). The caller keeps to the budget;
 * the store only counts. */
void          dcp_tier_store_put_ram    (DcpTierStore           *self,
                                         guint64                 key,
                                         const guint8           *data,
                                         gsize                   size);
/* The same, taking the blob: its bytes become the stored copy when the allocator is g_malloc
 * (no copy), else they are copied. */
void          dcp_tier_store_put_ram_take (DcpTierStore         *self,
                                           guint64               key,
                                           GByteArray           *blob);
/* Starts moving key's blob from RAM to a file (written with its checksum by the worker): the
 * key is on the disk tier from now on, and its RAM is freed when the write ends. FALSE without
 * a disk folder. A write that fails is reported by the next fetch of the key. */
gboolean      dcp_tier_store_move_to_disk (DcpTierStore         *self,
                                           guint64               key,
                                           GError              **error);

typedef enum {
  DCP_TIER_FETCH_READY,      /* dcp_tier_store_get answers at once */
  DCP_TIER_FETCH_PENDING,    /* the worker is reading it: ask again after a poll */
  DCP_TIER_FETCH_FAILED,     /* see the error; the key is gone */
} DcpTierFetch;

/* Whether key's blob is in RAM; if it is on disk only, starts reading it back. A damaged or
 * foreign file gives CORRUPT_FILE, a missing or unreadable one IO, a key never stored
 * NOT_FOUND. */
DcpTierFetch  dcp_tier_store_fetch      (DcpTierStore           *self,
                                         guint64                 key,
                                         GError                **error);
/* The blob of key: from RAM, from the staging buffer a fetch filled, or (waiting for the
 * worker) read and checked from disk. The bytes are the caller's; the store keeps its copy
 * until dcp_tier_store_remove. On failure the key is gone. */
GBytes       *dcp_tier_store_get        (DcpTierStore           *self,
                                         guint64                 key,
                                         GError                **error);
/* The blob of key when it is in RAM (in the RAM tier, being written, or read back by a fetch),
 * without a copy: valid until the key is removed or moved; NULL otherwise. */
const guint8 *dcp_tier_store_peek       (DcpTierStore           *self,
                                         guint64                 key,
                                         gsize                  *size);
/* Frees the staging buffer a finished fetch filled for key (the blob stays on disk); nothing
 * when there is none. */
void          dcp_tier_store_unstage    (DcpTierStore           *self,
                                         guint64                 key);
/* Applies the reads and writes the worker has finished; the number applied. Never blocks. */
guint         dcp_tier_store_poll       (DcpTierStore           *self);
/* Waits until no read or write is in flight (tests, shutdown). */
void          dcp_tier_store_wait       (DcpTierStore           *self);
/* Called from the worker thread after each read or write it finishes (to wake the engine
 * thread); set before the first move or fetch. */
void          dcp_tier_store_set_notify (DcpTierStore           *self,
                                         GFunc                   notify,
                                         gpointer                user_data);
/* Tests: every disk read and write takes at least this long (a slow disk). */
void          dcp_tier_store_set_io_delay (DcpTierStore         *self,
                                           gint64                delay_us);
void          dcp_tier_store_remove     (DcpTierStore           *self,
                                         guint64                 key);
/* The disk file of key (for tests and logs), NULL when key is not on disk. */
char         *dcp_tier_store_get_path   (const DcpTierStore     *self,
                                         guint64                 key);
void          dcp_tier_store_get_stats  (const DcpTierStore     *self,
                                         DcpTierStats           *stats);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTierStore, dcp_tier_store_free)

G_END_DECLS
