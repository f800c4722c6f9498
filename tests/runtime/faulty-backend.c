/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "faulty-backend"

#include "config.h"

#include "dcp-error.h"
#include "faulty-backend.h"

struct _FaultyBackend {
  DcpBackend parent_instance;
  DcpBackend *inner;
  guint fail_at[FAULT_N];        /* the call count that fails; 0: none */
  guint calls[FAULT_N];
};

G_DEFINE_FINAL_TYPE (FaultyBackend, faulty_backend, DCP_TYPE_BACKEND)

#define INNER(backend) (FAULTY_BACKEND (backend)->inner)

/* Counts the call; TRUE (and the error) when it is the one to fail. */
static gboolean
fails (DcpBackend *backend, Fault fault, GError **error)
{
  FaultyBackend *self = FAULTY_BACKEND (backend);
  static const char *const names[FAULT_N] = { "state save", "page table", "page copy" };

  if (++self->calls[fault] != self->fail_at[fault])
    return FALSE;
  self->fail_at[fault] = 0;
  g_set_error (error, DCP_ERROR, DCP_ERROR_DEVICE, "%s: injected device error", names[fault]);
  return TRUE;
}

static DcpSeqState *
faulty_state_new (DcpBackend *backend, GError **error)
{
  return dcp_backend_state_new (INNER (backend), error);
}

static void
faulty_state_free (DcpBackend *backend, DcpSeqState *state)
{
  dcp_backend_state_free (INNER (backend), state);
}

static gboolean
faulty_state_copy (DcpBackend *backend, DcpSeqState *dst, const DcpSeqState *src, GError **error)
{
  return dcp_backend_state_copy (INNER (backend), dst, src, error);
}

static guint
faulty_state_get_n_tokens (DcpBackend *backend, const DcpSeqState *state)
{
  return dcp_backend_state_get_n_tokens (INNER (backend), state);
}

static guint64
faulty_state_get_bytes (DcpBackend *backend, const DcpSeqState *state)
{
  return dcp_backend_state_get_bytes (INNER (backend), state);
}

static gboolean
faulty_forward (DcpBackend *backend, DcpBatchItem *items, guint n_items, GError **error)
{
  return dcp_backend_forward (INNER (backend), items, n_items, error);
}

static gboolean
faulty_mtp_forward (DcpBackend *backend, DcpMtpItem *items, guint n_items, GError **error)
{
  return dcp_backend_mtp_forward (INNER (backend), items, n_items, error);
}

static gboolean
faulty_has_mtp (DcpBackend *backend)
{
  return dcp_backend_has_mtp (INNER (backend));
}

/* A failed save writes part of the state first, as a device error midway would. */
static gboolean
faulty_state_save (DcpBackend *backend, const DcpSeqState *state, GByteArray *out,
                   GError **error)
{
  if (!dcp_backend_state_save (INNER (backend), state, out, error))
    return FALSE;
  if (!fails (backend, FAULT_STATE_SAVE, error))
    return TRUE;
  g_byte_array_set_size (out, out->len / 2);
  return FALSE;
}

static gboolean
faulty_state_load (DcpBackend *backend, DcpSeqState *state, const guint8 *data, gsize size,
                   GError **error)
{
  return dcp_backend_state_load (INNER (backend), state, data, size, error);
}

static DcpKvPool *
faulty_kv_pool_new (DcpBackend *backend, guint n_pages, guint page_tokens, GError **error)
{
  return dcp_backend_kv_pool_new (INNER (backend), n_pages, page_tokens, error);
}

static void
faulty_kv_pool_free (DcpBackend *backend, DcpKvPool *pool)
{
  dcp_backend_kv_pool_free (INNER (backend), pool);
}

static DcpSeqState *
faulty_state_new_paged (DcpBackend *backend, DcpKvPool *pool, GError **error)
{
  return dcp_backend_state_new_paged (INNER (backend), pool, error);
}

static gboolean
faulty_state_set_pages (DcpBackend *backend, DcpSeqState *state, const guint32 *pages,
                        guint n_pages, GError **error)
{
  return !fails (backend, FAULT_SET_PAGES, error) &&
         dcp_backend_state_set_pages (INNER (backend), state, pages, n_pages, error);
}

static gboolean
faulty_kv_pool_copy_page (DcpBackend *backend, DcpKvPool *pool, guint src, guint dst,
                          guint n_tokens, GError **error)
{
  return !fails (backend, FAULT_COPY_PAGE, error) &&
         dcp_backend_kv_pool_copy_page (INNER (backend), pool, src, dst, n_tokens, error);
}

static void
faulty_backend_finalize (GObject *object)
{
  g_clear_object (&FAULTY_BACKEND (object)->inner);
  G_OBJECT_CLASS (faulty_backend_parent_class)->finalize (object);
}

static void
faulty_backend_class_init (FaultyBackendClass *klass)
{
  DcpBackendClass *b = DCP_BACKEND_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = faulty_backend_finalize;
  b->state_new = faulty_state_new;
  b->state_free = faulty_state_free;
  b->state_copy = faulty_state_copy;
  b->state_get_n_tokens = faulty_state_get_n_tokens;
  b->state_get_bytes = faulty_state_get_bytes;
  b->forward = faulty_forward;
  b->mtp_forward = faulty_mtp_forward;
  b->has_mtp = faulty_has_mtp;
  b->state_save = faulty_state_save;
  b->state_load = faulty_state_load;
  b->kv_pool_new = faulty_kv_pool_new;
  b->kv_pool_free = faulty_kv_pool_free;
  b->state_new_paged = faulty_state_new_paged;
  b->state_set_pages = faulty_state_set_pages;
  b->kv_pool_copy_page = faulty_kv_pool_copy_page;
}

static void
faulty_backend_init (FaultyBackend *self)
{
}

DcpBackend *
faulty_backend_new (DcpBackend *inner)
{
  FaultyBackend *self = g_object_new (FAULTY_TYPE_BACKEND, NULL);

  self->inner = g_object_ref (inner);
  dcp_backend_set_model (DCP_BACKEND (self), dcp_backend_get_name (inner),
                         dcp_backend_get_config (inner));
  return DCP_BACKEND (self);
}

void
faulty_backend_fail (FaultyBackend *self, Fault fault, guint n)
{
  self->fail_at[fault] = n > 0 ? self->calls[fault] + n : 0;
}

guint
faulty_backend_calls (FaultyBackend *self, Fault fault)
{
  return self->calls[fault];
}
