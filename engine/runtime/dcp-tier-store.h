/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-error.h"

G_BEGIN_DECLS

/* The tiers below the device: idle sequence states, as the bytes the backend saved, in host
 * memory (RAM tier) or in files of a cache folder (disk tier), each tier with a byte budget.
 * Keys are the caller's ids. A disk file carries a header with the blob's size and SHA-256, and
 * is checked when read: a damaged or foreign file is deleted and reported as CORRUPT_FILE (the
 * caller reads the prompt again). RAM comes from an allocator the caller may replace (the CUDA
 * backend hands out pinned memory, so that copies to the device run asynchronously). */

typedef enum {
  DCP_TIER_DEVICE,
  DCP_TIER_RAM,
  DCP_TIER_DISK,
} DcpTier;

const char *dcp_tier_store_tier_name (DcpTier tier);

typedef struct {
  gpointer (*alloc) (gsize size, gpointer user_data);
  void     (*free)  (gpointer mem, gsize size, gpointer user_data);
  gpointer user_data;
} DcpHostAllocator;

typedef struct {
  guint64 ram_bytes, disk_bytes;           /* held now */
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
/* Moves key's blob from RAM to a file (written with its checksum), freeing the RAM. */
gboolean      dcp_tier_store_move_to_disk (DcpTierStore         *self,
                                           guint64               key,
                                           GError              **error);
/* The blob of key, from RAM or checked from disk. The bytes are the caller's; the store keeps
 * its copy until dcp_tier_store_remove. */
GBytes       *dcp_tier_store_get        (DcpTierStore           *self,
                                         guint64                 key,
                                         GError                **error);
void          dcp_tier_store_remove     (DcpTierStore           *self,
                                         guint64                 key);
/* The disk file of key (for tests and logs), NULL when key is not on disk. */
char         *dcp_tier_store_get_path   (const DcpTierStore     *self,
                                         guint64                 key);
void          dcp_tier_store_get_stats  (const DcpTierStore     *self,
                                         DcpTierStats           *stats);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTierStore, dcp_tier_store_free)

G_END_DECLS
