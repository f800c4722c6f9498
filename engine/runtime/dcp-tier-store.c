/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tier-store"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>

#include "dcp-tier-store.h"

/* A disk file: this header, then the blob. */
#define FILE_MAGIC "DCPTIER1"
#define DIGEST_LEN 32
typedef struct {
  char magic[8];
  guint64 key;
  guint64 size;
  guint8 sha256[DIGEST_LEN];
} FileHeader;

typedef struct {
  DcpTier tier;
  guint8 *ram;               /* RAM: the blob */
  gsize size;
} Item;

struct _DcpTierStore {
  guint64 budget[3];
  char *disk_dir;
  DcpHostAllocator allocator;
  GHashTable *items;         /* guint64 key -> Item */
  DcpTierStats stats;
};

const char *
dcp_tier_store_tier_name (DcpTier tier)
{
  switch (tier)
    {
    case DCP_TIER_DEVICE: return "device";
    case DCP_TIER_RAM: return "ram";
    case DCP_TIER_DISK: return "disk";
    default: return "unknown";
    }
}

static gpointer
default_alloc (gsize size, gpointer user_data)
{
  return g_malloc (size);
}

static void
default_free (gpointer mem, gsize size, gpointer user_data)
{
  g_free (mem);
}

static char *
file_path (const DcpTierStore *self, guint64 key)
{
  g_autofree char *name = g_strdup_printf ("state-%016" G_GINT64_MODIFIER "x.bin", key);
  return g_build_filename (self->disk_dir, name, NULL);
}

static void
item_drop (DcpTierStore *self, guint64 key, Item *item)
{
  if (item->tier == DCP_TIER_RAM)
    {
      self->allocator.free (item->ram, item->size, self->allocator.user_data);
      self->stats.ram_bytes -= item->size;
      self->stats.ram_items--;
    }
  else
    {
      g_autofree char *path = file_path (self, key);

      g_unlink (path);
      self->stats.disk_bytes -= item->size;
      self->stats.disk_items--;
    }
  item->ram = NULL;
}

DcpTierStore *
dcp_tier_store_new (guint64 ram_budget, guint64 disk_budget, const char *disk_dir,
                    const DcpHostAllocator *allocator, GError **error)
{
  g_autoptr(DcpTierStore) self = g_new0 (DcpTierStore, 1);

  self->budget[DCP_TIER_RAM] = ram_budget;
  self->budget[DCP_TIER_DISK] = disk_dir != NULL ? disk_budget : 0;
  self->allocator.alloc = default_alloc;
  self->allocator.free = default_free;
  if (allocator != NULL)
    self->allocator = *allocator;
  self->items = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  if (disk_dir != NULL)
    {
      g_autoptr(GDir) dir = NULL;
      const char *name;

      if (g_mkdir_with_parents (disk_dir, 0700) != 0)
        {
          int saved = errno;
          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "disk cache %s: %s", disk_dir, g_strerror (saved));
          return NULL;
        }
      self->disk_dir = g_strdup (disk_dir);
      /* Files of an earlier run name states this run has no index for. */
      dir = g_dir_open (disk_dir, 0, NULL);
      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        if (g_str_has_prefix (name, "state-") && g_str_has_suffix (name, ".bin"))
          {
            g_autofree char *path = g_build_filename (disk_dir, name, NULL);
            g_unlink (path);
          }
    }
  return g_steal_pointer (&self);
}

void
dcp_tier_store_free (DcpTierStore *self)
{
  GHashTableIter iter;
  gpointer key, value;

  if (self == NULL)
    return;
  g_hash_table_iter_init (&iter, self->items);
  while (g_hash_table_iter_next (&iter, &key, &value))
    item_drop (self, *(guint64 *) key, value);
  g_hash_table_unref (self->items);
  g_free (self->disk_dir);
  g_free (self);
}

guint64
dcp_tier_store_get_budget (const DcpTierStore *self, DcpTier tier)
{
  g_return_val_if_fail (self != NULL && tier <= DCP_TIER_DISK, 0);
  return self->budget[tier];
}

guint64
dcp_tier_store_get_free (const DcpTierStore *self, DcpTier tier)
{
  guint64 used;

  g_return_val_if_fail (self != NULL && (tier == DCP_TIER_RAM || tier == DCP_TIER_DISK), 0);
  used = tier == DCP_TIER_RAM ? self->stats.ram_bytes : self->stats.disk_bytes;
  return used >= self->budget[tier] ? 0 : self->budget[tier] - used;
}

gboolean
dcp_tier_store_lookup (const DcpTierStore *self, guint64 key, DcpTier *tier, gsize *size)
{
  Item *item;

  g_return_val_if_fail (self != NULL, FALSE);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL)
    return FALSE;
  if (tier != NULL)
    *tier = item->tier;
  if (size != NULL)
    *size = item->size;
  return TRUE;
}

void
dcp_tier_store_remove (DcpTierStore *self, guint64 key)
{
  Item *item;

  g_return_if_fail (self != NULL);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL)
    return;
  item_drop (self, key, item);
  g_hash_table_remove (self->items, &key);
}

void
dcp_tier_store_put_ram (DcpTierStore *self, guint64 key, const guint8 *data, gsize size)
{
  Item *item;

  g_return_if_fail (self != NULL && (data != NULL || size == 0));
  dcp_tier_store_remove (self, key);
  item = g_new0 (Item, 1);
  item->tier = DCP_TIER_RAM;
  item->size = size;
  item->ram = self->allocator.alloc (MAX (size, 1), self->allocator.user_data);
  if (size > 0)
    memcpy (item->ram, data, size);
  g_hash_table_insert (self->items, g_memdup2 (&key, sizeof key), item);
  self->stats.ram_bytes += size;
  self->stats.ram_items++;
  self->stats.bytes_to_ram += size;
}

static void
digest (const guint8 *data, gsize size, guint8 out[DIGEST_LEN])
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  gsize len = DIGEST_LEN;

  g_checksum_update (sum, data, size);
  g_checksum_get_digest (sum, out, &len);
}

gboolean
dcp_tier_store_move_to_disk (DcpTierStore *self, guint64 key, GError **error)
{
  g_autofree char *path = NULL;
  g_autofree guint8 *file = NULL;
  FileHeader header = { { 0 } };
  Item *item;

  g_return_val_if_fail (self != NULL, FALSE);
  item = g_hash_table_lookup (self->items, &key);
  g_return_val_if_fail (item != NULL && item->tier == DCP_TIER_RAM, FALSE);
  if (self->disk_dir == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "no disk cache folder");
      return FALSE;
    }
  memcpy (header.magic, FILE_MAGIC, sizeof header.magic);
  header.key = GUINT64_TO_LE (key);
  header.size = GUINT64_TO_LE ((guint64) item->size);
  digest (item->ram, item->size, header.sha256);
  file = g_malloc (sizeof header + item->size);
  memcpy (file, &header, sizeof header);
  if (item->size > 0)
    memcpy (file + sizeof header, item->ram, item->size);
  path = file_path (self, key);
  if (!g_file_set_contents (path, (const char *) file, sizeof header + item->size, error))
    return FALSE;
  self->allocator.free (item->ram, item->size, self->allocator.user_data);
  item->ram = NULL;
  item->tier = DCP_TIER_DISK;
  self->stats.ram_bytes -= item->size;
  self->stats.ram_items--;
  self->stats.bytes_from_ram += item->size;
  self->stats.disk_bytes += item->size;
  self->stats.disk_items++;
  self->stats.bytes_to_disk += item->size;
  return TRUE;
}

static GBytes *
read_file (DcpTierStore *self, guint64 key, gsize size, GError **error)
{
  g_autofree char *path = file_path (self, key);
  g_autofree char *contents = NULL;
  gsize length = 0;
  FileHeader header;
  guint8 sum[DIGEST_LEN];
  const char *problem = NULL;

  if (!g_file_get_contents (path, &contents, &length, error))
    return NULL;
  if (length < sizeof header)
    problem = "shorter than its header";
  else
    {
      memcpy (&header, contents, sizeof header);
      if (memcmp (header.magic, FILE_MAGIC, sizeof header.magic) != 0)
        problem = "not a state file";
      else if (GUINT64_FROM_LE (header.key) != key)
        problem = "another state's file";
      else if (GUINT64_FROM_LE (header.size) != size || length - sizeof header != size)
        problem = "wrong size";
      else
        {
          digest ((const guint8 *) contents + sizeof header, size, sum);
          if (memcmp (sum, header.sha256, DIGEST_LEN) != 0)
            problem = "checksum mismatch";
        }
    }
  if (problem != NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "disk cache file %s: %s", path, problem);
      return NULL;
    }
  return g_bytes_new (contents + sizeof header, size);
}

GBytes *
dcp_tier_store_get (DcpTierStore *self, guint64 key, GError **error)
{
  Item *item;
  GBytes *bytes;

  g_return_val_if_fail (self != NULL, NULL);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "no saved state %" G_GUINT64_FORMAT, key);
      return NULL;
    }
  if (item->tier == DCP_TIER_RAM)
    {
      self->stats.bytes_from_ram += item->size;
      return g_bytes_new (item->ram, item->size);
    }
  bytes = read_file (self, key, item->size, error);
  if (bytes == NULL)
    {
      if (error != NULL && g_error_matches (*error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE))
        self->stats.corrupt_files++;
      dcp_tier_store_remove (self, key);
      return NULL;
    }
  self->stats.bytes_from_disk += item->size;
  return bytes;
}

char *
dcp_tier_store_get_path (const DcpTierStore *self, guint64 key)
{
  DcpTier tier;

  g_return_val_if_fail (self != NULL, NULL);
  if (!dcp_tier_store_lookup (self, key, &tier, NULL) || tier != DCP_TIER_DISK)
    return NULL;
  return file_path (self, key);
}

void
dcp_tier_store_get_stats (const DcpTierStore *self, DcpTierStats *stats)
{
  g_return_if_fail (self != NULL && stats != NULL);
  *stats = self->stats;
}
