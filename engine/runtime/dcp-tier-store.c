/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tier-store"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <gio/gio.h>
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

/* A read or write for the worker. The worker touches only the job; the engine thread applies
 * the result in dcp_tier_store_poll. */
typedef struct {
  DcpTierStore *store;
  guint64 key;
  gboolean write;
  char *path;
  guint8 *data;              /* write: the item's RAM (the job's own once orphaned);
                                read: what the worker read, from the allocator */
  gsize size;
  gboolean orphan;           /* the key was removed meanwhile: poll only cleans up */
  GError *error;
} Job;

typedef struct {
  DcpTier tier;              /* the tier it counts in */
  guint8 *ram;               /* RAM: the blob; disk: the blob while it is written, or once read
                                back (staged) */
  gsize size;
  char *path;                /* disk */
  Job *job;                  /* the read or write in flight */
  GError *failed;            /* the write or read failed: the next fetch reports it */
} Item;

struct _DcpTierStore {
  guint64 budget[3];
  char *disk_dir;
  DcpHostAllocator allocator;
  GHashTable *items;         /* guint64 key -> Item */
  DcpTierStats stats;
  guint64 next_file;
  GThreadPool *worker;
  GAsyncQueue *done;         /* Job, finished by the worker */
  guint in_flight;
  GFunc notify;
  gpointer notify_data;
  gint64 io_delay_us;
};

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

static void
ram_free (DcpTierStore *self, guint8 *mem, gsize size)
{
  if (mem != NULL)
    self->allocator.free (mem, MAX (size, 1), self->allocator.user_data);
}

static void
digest (const guint8 *data, gsize size, guint8 out[DIGEST_LEN])
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  gsize len = DIGEST_LEN;

  g_checksum_update (sum, data, size);
  g_checksum_get_digest (sum, out, &len);
}

/* ---- the worker ---- */

/* The header, then the blob, streamed: no second copy of a state that may be gigabytes. The
 * file appears under its name only once complete (GIO writes a temporary file and renames). */
static gboolean
write_file (Job *job, GError **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (job->path);
  g_autoptr(GFileOutputStream) out = NULL;
  g_autoptr(GCancellable) abandon = NULL;
  FileHeader header = { { 0 } };
  GOutputStream *stream;

  memcpy (header.magic, FILE_MAGIC, sizeof header.magic);
  header.key = GUINT64_TO_LE (job->key);
  header.size = GUINT64_TO_LE ((guint64) job->size);
  digest (job->data, job->size, header.sha256);
  out = g_file_replace (file, NULL, FALSE, G_FILE_CREATE_PRIVATE | G_FILE_CREATE_REPLACE_DESTINATION,
                        NULL, error);
  if (out == NULL)
    return FALSE;
  stream = G_OUTPUT_STREAM (out);
  if (g_output_stream_write_all (stream, &header, sizeof header, NULL, NULL, error) &&
      (job->size == 0 || g_output_stream_write_all (stream, job->data, job->size, NULL, NULL, error)))
    return g_output_stream_close (stream, NULL, error);
  /* Closing with a cancelled cancellable drops the temporary file. */
  abandon = g_cancellable_new ();
  g_cancellable_cancel (abandon);
  g_output_stream_close (stream, abandon, NULL);
  return FALSE;
}

/* Reads and checks the file; the blob goes to job->data, read straight into the allocator's
 * memory. */
static gboolean
read_file (DcpTierStore *self, Job *job, GError **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (job->path);
  g_autoptr(GFileInputStream) in = NULL;
  g_autoptr(GError) local = NULL;
  GInputStream *stream;
  FileHeader header;
  guint8 sum[DIGEST_LEN], extra;
  gsize got = 0;
  const char *problem = NULL;
  guint8 *data = NULL;

  in = g_file_read (file, NULL, &local);
  stream = in != NULL ? G_INPUT_STREAM (in) : NULL;
  if (stream == NULL || !g_input_stream_read_all (stream, &header, sizeof header, &got, NULL, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "disk cache file %s: %s", job->path, local->message);
      return FALSE;
    }
  if (got < sizeof header)
    problem = "shorter than its header";
  else if (memcmp (header.magic, FILE_MAGIC, sizeof header.magic) != 0)
    problem = "not a state file";
  else if (GUINT64_FROM_LE (header.key) != job->key)
    problem = "another state's file";
  else if (GUINT64_FROM_LE (header.size) != job->size)
    problem = "wrong size";
  else
    {
      data = self->allocator.alloc (MAX (job->size, 1), self->allocator.user_data);
      if (!g_input_stream_read_all (stream, data, job->size, &got, NULL, &local))
        {
          self->allocator.free (data, MAX (job->size, 1), self->allocator.user_data);
          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "disk cache file %s: %s", job->path, local->message);
          return FALSE;
        }
      if (got != job->size || g_input_stream_read (stream, &extra, 1, NULL, NULL) != 0)
        problem = "wrong size";
      else
        {
          digest (data, job->size, sum);
          if (memcmp (sum, header.sha256, DIGEST_LEN) != 0)
            problem = "checksum mismatch";
        }
    }
  if (problem != NULL)
    {
      if (data != NULL)
        self->allocator.free (data, MAX (job->size, 1), self->allocator.user_data);
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "disk cache file %s: %s", job->path, problem);
      return FALSE;
    }
  job->data = data;
  return TRUE;
}

static void
worker_run (gpointer data, gpointer user_data)
{
  Job *job = data;
  DcpTierStore *self = job->store;

  if (self->io_delay_us > 0)
    g_usleep (self->io_delay_us);
  if (job->write)
    write_file (job, &job->error);
  else
    read_file (self, job, &job->error);
  g_async_queue_push (self->done, job);
  if (self->notify != NULL)
    self->notify (self, self->notify_data);
}

static void
start_job (DcpTierStore *self, Item *item, guint64 key, gboolean write)
{
  Job *job = g_new0 (Job, 1);

  job->store = self;
  job->key = key;
  job->write = write;
  job->path = g_strdup (item->path);
  job->data = write ? item->ram : NULL;
  job->size = item->size;
  item->job = job;
  self->in_flight++;
  g_thread_pool_push (self->worker, job, NULL);
}

static void
job_free (Job *job)
{
  g_free (job->path);
  g_clear_error (&job->error);
  g_free (job);
}

/* ---- items ---- */

/* Releases what the item holds and its counts; a job in flight is left to clean up after
 * itself. */
static void
item_drop (DcpTierStore *self, Item *item)
{
  if (item->tier == DCP_TIER_RAM)
    {
      self->stats.ram_bytes -= item->size;
      self->stats.ram_items--;
    }
  else if (item->failed == NULL)
    {
      self->stats.disk_bytes -= item->size;
      self->stats.disk_items--;
    }
  if (item->job != NULL)
    {
      item->job->orphan = TRUE;
      if (item->job->write)
        {
          /* The worker still reads the RAM: the job frees it, and the file, when done. */
          self->stats.ram_bytes -= item->size;
          self->stats.ram_writing -= item->size;
          self->stats.ram_items--;
          item->ram = NULL;
        }
      else if (item->path != NULL)
        g_unlink (item->path);
    }
  else
    {
      if (item->tier == DCP_TIER_DISK && item->ram != NULL)
        self->stats.staged_bytes -= item->size;
      if (item->path != NULL)
        g_unlink (item->path);
    }
  ram_free (self, item->ram, item->size);
  item->ram = NULL;
  g_clear_error (&item->failed);
  g_clear_pointer (&item->path, g_free);
}

static void
item_free (gpointer data)
{
  g_free (data);
}

/* The worker's result, on the engine thread. */
static void
apply (DcpTierStore *self, Job *job)
{
  Item *item = g_hash_table_lookup (self->items, &job->key);

  self->in_flight--;
  if (job->orphan || item == NULL || item->job != job)
    {
      if (job->write)
        {
          ram_free (self, job->data, job->size);
          g_unlink (job->path);
        }
      else
        ram_free (self, job->data, job->size);
      job_free (job);
      return;
    }
  item->job = NULL;
  if (job->write)
    {
      /* Written or not, the RAM copy goes: a failed write is the next fetch's error. */
      ram_free (self, item->ram, item->size);
      item->ram = NULL;
      self->stats.ram_bytes -= item->size;
      self->stats.ram_writing -= item->size;
      self->stats.ram_items--;
      if (job->error == NULL)
        {
          self->stats.bytes_from_ram += item->size;
          self->stats.bytes_to_disk += item->size;
        }
    }
  else if (job->error == NULL)
    {
      item->ram = g_steal_pointer (&job->data);
      self->stats.staged_bytes += item->size;
      self->stats.bytes_from_disk += item->size;
    }
  if (job->error != NULL)
    {
      g_message ("%s", job->error->message);
      if (g_error_matches (job->error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE))
        self->stats.corrupt_files++;
      g_unlink (item->path);
      self->stats.disk_bytes -= item->size;
      self->stats.disk_items--;
      item->failed = g_steal_pointer (&job->error);
    }
  job_free (job);
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
  self->items = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, item_free);
  self->done = g_async_queue_new ();
  /* One thread: disk work in the order it was asked for. */
  self->worker = g_thread_pool_new (worker_run, self, 1, FALSE, NULL);
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
  gpointer value;

  if (self == NULL)
    return;
  if (self->items != NULL)
    {
      g_hash_table_iter_init (&iter, self->items);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        item_drop (self, value);
    }
  if (self->worker != NULL)
    {
      dcp_tier_store_wait (self);
      g_thread_pool_free (self->worker, FALSE, TRUE);
    }
  g_clear_pointer (&self->done, g_async_queue_unref);
  g_clear_pointer (&self->items, g_hash_table_unref);
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
  item_drop (self, item);
  g_hash_table_remove (self->items, &key);
}

static void
put_item (DcpTierStore *self, guint64 key, guint8 *ram, gsize size)
{
  Item *item = g_new0 (Item, 1);

  item->tier = DCP_TIER_RAM;
  item->size = size;
  item->ram = ram;
  g_hash_table_insert (self->items, g_memdup2 (&key, sizeof key), item);
  self->stats.ram_bytes += size;
  self->stats.ram_items++;
  self->stats.bytes_to_ram += size;
}

void
dcp_tier_store_put_ram (DcpTierStore *self, guint64 key, const guint8 *data, gsize size)
{
  guint8 *ram;

  g_return_if_fail (self != NULL && (data != NULL || size == 0));
  dcp_tier_store_remove (self, key);
  ram = self->allocator.alloc (MAX (size, 1), self->allocator.user_data);
  if (size > 0)
    memcpy (ram, data, size);
  put_item (self, key, ram, size);
}

void
dcp_tier_store_put_ram_take (DcpTierStore *self, guint64 key, GByteArray *blob)
{
  gsize size;

  g_return_if_fail (self != NULL && blob != NULL);
  if (self->allocator.alloc != default_alloc || blob->len == 0)
    {
      dcp_tier_store_put_ram (self, key, blob->data, blob->len);
      g_byte_array_unref (blob);
      return;
    }
  /* g_malloc'd either way: the array's bytes become the item's. */
  dcp_tier_store_remove (self, key);
  size = blob->len;
  put_item (self, key, g_byte_array_free (blob, FALSE), size);
}

gboolean
dcp_tier_store_move_to_disk (DcpTierStore *self, guint64 key, GError **error)
{
  g_autofree char *name = NULL;
  Item *item;

  g_return_val_if_fail (self != NULL, FALSE);
  item = g_hash_table_lookup (self->items, &key);
  g_return_val_if_fail (item != NULL && item->tier == DCP_TIER_RAM && item->job == NULL, FALSE);
  if (self->disk_dir == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "no disk cache folder");
      return FALSE;
    }
  /* A file name is never reused, so a late write of a removed key cannot meet a new one. */
  name = g_strdup_printf ("state-%016" G_GINT64_MODIFIER "x-%" G_GUINT64_FORMAT ".bin", key,
                          self->next_file++);
  item->path = g_build_filename (self->disk_dir, name, NULL);
  item->tier = DCP_TIER_DISK;
  self->stats.ram_writing += item->size;
  self->stats.disk_bytes += item->size;
  self->stats.disk_items++;
  start_job (self, item, key, TRUE);
  return TRUE;
}

DcpTierFetch
dcp_tier_store_fetch (DcpTierStore *self, guint64 key, GError **error)
{
  Item *item;

  g_return_val_if_fail (self != NULL, DCP_TIER_FETCH_FAILED);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "no saved state %" G_GUINT64_FORMAT, key);
      return DCP_TIER_FETCH_FAILED;
    }
  if (item->failed != NULL)
    {
      g_propagate_error (error, g_error_copy (item->failed));
      dcp_tier_store_remove (self, key);
      return DCP_TIER_FETCH_FAILED;
    }
  if (item->ram != NULL)
    return DCP_TIER_FETCH_READY;
  if (item->job == NULL)
    start_job (self, item, key, FALSE);
  return DCP_TIER_FETCH_PENDING;
}

GBytes *
dcp_tier_store_get (DcpTierStore *self, guint64 key, GError **error)
{
  Item *item;
  DcpTierFetch fetch;

  g_return_val_if_fail (self != NULL, NULL);
  while ((fetch = dcp_tier_store_fetch (self, key, error)) == DCP_TIER_FETCH_PENDING)
    dcp_tier_store_wait (self);
  if (fetch == DCP_TIER_FETCH_FAILED)
    return NULL;
  item = g_hash_table_lookup (self->items, &key);
  if (item->tier == DCP_TIER_RAM)
    self->stats.bytes_from_ram += item->size;
  return g_bytes_new (item->ram, item->size);
}

const guint8 *
dcp_tier_store_peek (DcpTierStore *self, guint64 key, gsize *size)
{
  Item *item;

  g_return_val_if_fail (self != NULL && size != NULL, NULL);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL || item->ram == NULL)
    return NULL;
  if (item->tier == DCP_TIER_RAM)
    self->stats.bytes_from_ram += item->size;
  *size = item->size;
  return item->ram;
}

void
dcp_tier_store_unstage (DcpTierStore *self, guint64 key)
{
  Item *item;

  g_return_if_fail (self != NULL);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL || item->tier != DCP_TIER_DISK || item->job != NULL || item->ram == NULL)
    return;
  ram_free (self, item->ram, item->size);
  item->ram = NULL;
  self->stats.staged_bytes -= item->size;
}

guint
dcp_tier_store_poll (DcpTierStore *self)
{
  Job *job;
  guint n = 0;

  g_return_val_if_fail (self != NULL, 0);
  while ((job = g_async_queue_try_pop (self->done)) != NULL)
    {
      apply (self, job);
      n++;
    }
  return n;
}

void
dcp_tier_store_wait (DcpTierStore *self)
{
  g_return_if_fail (self != NULL);
  while (self->in_flight > 0)
    apply (self, g_async_queue_pop (self->done));
}

void
dcp_tier_store_set_notify (DcpTierStore *self, GFunc notify, gpointer user_data)
{
  g_return_if_fail (self != NULL && self->in_flight == 0);
  self->notify = notify;
  self->notify_data = user_data;
}

void
dcp_tier_store_set_io_delay (DcpTierStore *self, gint64 delay_us)
{
  g_return_if_fail (self != NULL && self->in_flight == 0);
  self->io_delay_us = delay_us;
}

char *
dcp_tier_store_get_path (const DcpTierStore *self, guint64 key)
{
  Item *item;

  g_return_val_if_fail (self != NULL, NULL);
  item = g_hash_table_lookup (self->items, &key);
  if (item == NULL || item->tier != DCP_TIER_DISK || item->path == NULL)
    return NULL;
  return g_strdup (item->path);
}

void
dcp_tier_store_get_stats (const DcpTierStore *self, DcpTierStats *stats)
{
  g_return_if_fail (self != NULL && stats != NULL);
  *stats = self->stats;
}
