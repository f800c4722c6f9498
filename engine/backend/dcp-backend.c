/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend"

#include "config.h"

#include "dcp-backend.h"
#include "dcp-error.h"

typedef struct {
  char *name;
  DcpModelConfig config;
} DcpBackendPrivate;

G_DEFINE_ABSTRACT_TYPE_WITH_PRIVATE (DcpBackend, dcp_backend, G_TYPE_OBJECT)

static void
dcp_backend_finalize (GObject *object)
{
  DcpBackendPrivate *priv = dcp_backend_get_instance_private (DCP_BACKEND (object));

  g_free (priv->name);
  G_OBJECT_CLASS (dcp_backend_parent_class)->finalize (object);
}

static gboolean
default_has_mtp (DcpBackend *self)
{
  return FALSE;
}

static gboolean
default_mtp_forward (DcpBackend *self, DcpMtpItem *items, guint n_items, GError **error)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "the model has no MTP head");
  return FALSE;
}

static void
default_mtp_rewind (DcpBackend *self, DcpSeqState *state, guint n_tokens)
{
}

static DcpKvPool *
default_kv_pool_new (DcpBackend *self, guint n_pages, guint page_tokens, GError **error)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "the %s backend has no paged KV pool",
               dcp_backend_get_name (self));
  return NULL;
}

static void
dcp_backend_class_init (DcpBackendClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = dcp_backend_finalize;
  klass->kv_pool_new = default_kv_pool_new;
  klass->has_mtp = default_has_mtp;
  klass->mtp_forward = default_mtp_forward;
  klass->mtp_rewind = default_mtp_rewind;
}

static void
dcp_backend_init (DcpBackend *self)
{
}

void
dcp_backend_set_model (DcpBackend *self, const char *name, const DcpModelConfig *config)
{
  DcpBackendPrivate *priv = dcp_backend_get_instance_private (self);

  g_return_if_fail (DCP_IS_BACKEND (self) && name != NULL && config != NULL);
  g_free (priv->name);
  priv->name = g_strdup (name);
  priv->config = *config;
}

const char *
dcp_backend_get_name (DcpBackend *self)
{
  DcpBackendPrivate *priv = dcp_backend_get_instance_private (self);

  g_return_val_if_fail (DCP_IS_BACKEND (self), NULL);
  return priv->name;
}

const DcpModelConfig *
dcp_backend_get_config (DcpBackend *self)
{
  DcpBackendPrivate *priv = dcp_backend_get_instance_private (self);

  g_return_val_if_fail (DCP_IS_BACKEND (self), NULL);
  return &priv->config;
}

gboolean
dcp_backend_has_mtp (DcpBackend *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self), FALSE);
  return DCP_BACKEND_GET_CLASS (self)->has_mtp (self);
}

gboolean
dcp_backend_takes_embeddings (DcpBackend *self)
{
  DcpBackendClass *klass;

  g_return_val_if_fail (DCP_IS_BACKEND (self), FALSE);
  klass = DCP_BACKEND_GET_CLASS (self);
  return klass->takes_embeddings != NULL && klass->takes_embeddings (self);
}

DcpSeqState *
dcp_backend_state_new (DcpBackend *self, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self), NULL);
  return DCP_BACKEND_GET_CLASS (self)->state_new (self, error);
}

void
dcp_backend_state_free (DcpBackend *self, DcpSeqState *state)
{
  g_return_if_fail (DCP_IS_BACKEND (self));
  if (state != NULL)
    DCP_BACKEND_GET_CLASS (self)->state_free (self, state);
}

gboolean
dcp_backend_state_copy (DcpBackend *self, DcpSeqState *dst, const DcpSeqState *src, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (dst != NULL && src != NULL, FALSE);
  if (dst == src)
    return TRUE;
  return DCP_BACKEND_GET_CLASS (self)->state_copy (self, dst, src, error);
}

guint
dcp_backend_state_get_n_tokens (DcpBackend *self, const DcpSeqState *state)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && state != NULL, 0);
  return DCP_BACKEND_GET_CLASS (self)->state_get_n_tokens (self, state);
}

guint64
dcp_backend_state_get_bytes (DcpBackend *self, const DcpSeqState *state)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && state != NULL, 0);
  return DCP_BACKEND_GET_CLASS (self)->state_get_bytes (self, state);
}

/* Checks what every backend would check: tokens in the vocabulary (but for rows given their
 * embedding), outputs where asked. */
static gboolean
check_rows (DcpBackend *self, const char *what, guint index, const guint32 *tokens, guint n_tokens,
            const float *const *embeddings, DcpLogitsMode mode, const float *logits, GError **error)
{
  DcpBackendPrivate *priv = dcp_backend_get_instance_private (self);

  if (n_tokens == 0 || tokens == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s %u: no tokens", what, index);
      return FALSE;
    }
  for (guint i = 0; i < n_tokens; i++)
    if (tokens[i] >= priv->config.vocab_size && (embeddings == NULL || embeddings[i] == NULL))
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "%s %u: token %u is outside the vocabulary (%u)", what, index, tokens[i],
                     priv->config.vocab_size);
        return FALSE;
      }
  if (mode != DCP_LOGITS_NONE && logits == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s %u: no logits buffer", what, index);
      return FALSE;
    }
  return TRUE;
}

/* A verify item's extras: row draws take a sampler and no ban or mask; a save, a backend that
 * keeps one and few enough rows. */
static gboolean
check_verify (DcpBackend *self, guint index, const DcpBatchItem *item, GError **error)
{
  if (item->row_tokens != NULL &&
      (item->sampler == NULL || item->n_banned > 0 || item->allowed != NULL))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "batch item %u: row draws need a sampler and take no banned or allowed tokens",
                   index);
      return FALSE;
    }
  if (item->save != NULL && item->n_tokens > DCP_STEP_SAVE_ROWS)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "batch item %u: %u rows are more than a step save holds (%u)", index,
                   item->n_tokens, DCP_STEP_SAVE_ROWS);
      return FALSE;
    }
  return TRUE;
}

/* A tapping item: a backend that taps and layers the model has. */
static gboolean
check_taps (DcpBackend *self, guint index, const DcpBatchItem *item, GError **error)
{
  const DcpModelConfig *config = dcp_backend_get_config (self);

  if (item->n_tap_layers == 0)
    return TRUE;
  if (!DCP_BACKEND_GET_CLASS (self)->forward_taps)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "the %s backend does not return tapped hidden states (the DFlash drafter's input)",
                   dcp_backend_get_name (self));
      return FALSE;
    }
  g_return_val_if_fail (item->tap_layers != NULL && item->taps != NULL, FALSE);
  for (guint j = 0; j < item->n_tap_layers; j++)
    if (item->tap_layers[j] >= config->n_layers)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "batch item %u: tap after layer %u, but the model has %u layers", index,
                     item->tap_layers[j], config->n_layers);
        return FALSE;
      }
  return TRUE;
}

gboolean
dcp_backend_forward (DcpBackend *self, DcpBatchItem *items, guint n_items, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (DCP_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++)
    {
      g_return_val_if_fail (items[i].state != NULL, FALSE);
      if ((items[i].positions != NULL || items[i].embeddings != NULL) &&
          !dcp_backend_takes_embeddings (self))
        {
          g_set_error (
              error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
              "batch item %u: the %s backend does not take positions and embeddings (images)", i,
              dcp_backend_get_name (self));
          return FALSE;
        }
      if (!check_rows (self, "batch item", i, items[i].tokens, items[i].n_tokens,
                       items[i].embeddings, items[i].logits_mode, items[i].logits, error) ||
          !check_verify (self, i, &items[i], error) ||
          !check_taps (self, i, &items[i], error))
        return FALSE;
    }
  /* a save describes the step it saved; spent until the step has run */
  for (guint i = 0; i < n_items; i++)
    if (items[i].save != NULL)
      *(DcpStepSaveHeader *) items[i].save =
          (DcpStepSaveHeader){ NULL, dcp_backend_state_get_n_tokens (self, items[i].state),
                               items[i].n_tokens };
  if (dcp_backend_needs_host_draws (self, items, n_items))
    ok = dcp_backend_forward_host_draws (self, items, n_items, error);
  else
    ok = DCP_BACKEND_GET_CLASS (self)->forward (self, items, n_items, error);
  for (guint i = 0; ok && i < n_items; i++)
    if (items[i].save != NULL)
      ((DcpStepSaveHeader *) items[i].save)->state = items[i].state;
  return ok;
}

DcpStepSave *
dcp_backend_step_save_new (DcpBackend *self, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self), NULL);
  if (DCP_BACKEND_GET_CLASS (self)->step_save_new == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "the %s backend cannot cut a step back", dcp_backend_get_name (self));
      return NULL;
    }
  return DCP_BACKEND_GET_CLASS (self)->step_save_new (self, error);
}

void
dcp_backend_step_save_free (DcpBackend *self, DcpStepSave *save)
{
  g_return_if_fail (DCP_IS_BACKEND (self));
  if (save != NULL)
    DCP_BACKEND_GET_CLASS (self)->step_save_free (self, save);
}

gboolean
dcp_backend_state_keep (DcpBackend *self, DcpSeqState *state, DcpStepSave *save, guint n_keep,
                        GError **error)
{
  DcpStepSaveHeader *h = (DcpStepSaveHeader *) save;
  gboolean ok;

  g_return_val_if_fail (DCP_IS_BACKEND (self) && state != NULL && save != NULL, FALSE);
  if (h->state != state || n_keep > h->n_rows ||
      dcp_backend_state_get_n_tokens (self, state) != h->n_before + h->n_rows)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "state keep: the save holds no last step of this state, or %u rows are more "
                   "than it read",
                   n_keep);
      h->state = NULL;
      return FALSE;
    }
  ok = n_keep == h->n_rows ||
       DCP_BACKEND_GET_CLASS (self)->state_keep (self, state, save, n_keep, error);
  h->state = NULL;
  return ok;
}

gboolean
dcp_backend_mtp_forward (DcpBackend *self, DcpMtpItem *items, guint n_items, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self), FALSE);
  g_return_val_if_fail (items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++)
    {
      g_return_val_if_fail (items[i].state != NULL && items[i].hidden != NULL, FALSE);
      if (!check_rows (self, "MTP item", i, items[i].tokens, items[i].n_tokens, NULL,
                       items[i].logits_mode, items[i].logits, error))
        return FALSE;
    }
  return DCP_BACKEND_GET_CLASS (self)->mtp_forward (self, items, n_items, error);
}

void
dcp_backend_mtp_rewind (DcpBackend *self, DcpSeqState *state, guint n_tokens)
{
  g_return_if_fail (DCP_IS_BACKEND (self) && state != NULL);
  DCP_BACKEND_GET_CLASS (self)->mtp_rewind (self, state, n_tokens);
}

gboolean
dcp_backend_state_save (DcpBackend *self, const DcpSeqState *state, GByteArray *out,
                        GError **error)
{
  guint len;

  g_return_val_if_fail (DCP_IS_BACKEND (self) && state != NULL && out != NULL, FALSE);
  len = out->len;
  if (DCP_BACKEND_GET_CLASS (self)->state_save (self, state, out, error))
    return TRUE;
  g_byte_array_set_size (out, len);
  return FALSE;
}

gboolean
dcp_backend_state_load (DcpBackend *self, DcpSeqState *state, const guint8 *data, gsize size,
                        GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && state != NULL, FALSE);
  g_return_val_if_fail (data != NULL || size == 0, FALSE);
  return DCP_BACKEND_GET_CLASS (self)->state_load (self, state, data, size, error);
}

DcpKvPool *
dcp_backend_kv_pool_new (DcpBackend *self, guint n_pages, guint page_tokens, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && n_pages > 0 && page_tokens > 0, NULL);
  return DCP_BACKEND_GET_CLASS (self)->kv_pool_new (self, n_pages, page_tokens, error);
}

void
dcp_backend_kv_pool_free (DcpBackend *self, DcpKvPool *pool)
{
  g_return_if_fail (DCP_IS_BACKEND (self));
  if (pool != NULL)
    DCP_BACKEND_GET_CLASS (self)->kv_pool_free (self, pool);
}

DcpSeqState *
dcp_backend_state_new_paged (DcpBackend *self, DcpKvPool *pool, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && pool != NULL, NULL);
  return DCP_BACKEND_GET_CLASS (self)->state_new_paged (self, pool, error);
}

gboolean
dcp_backend_state_set_pages (DcpBackend *self, DcpSeqState *state, const guint32 *pages,
                             guint n_pages, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && state != NULL, FALSE);
  g_return_val_if_fail (pages != NULL || n_pages == 0, FALSE);
  return DCP_BACKEND_GET_CLASS (self)->state_set_pages (self, state, pages, n_pages, error);
}

gboolean
dcp_backend_kv_pool_copy_page (DcpBackend *self, DcpKvPool *pool, guint src, guint dst,
                               guint n_tokens, GError **error)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && pool != NULL, FALSE);
  return DCP_BACKEND_GET_CLASS (self)->kv_pool_copy_page (self, pool, src, dst, n_tokens, error);
}

guint
dcp_backend_weights_count (DcpBackend *self)
{
  DcpBackendClass *klass;

  g_return_val_if_fail (DCP_IS_BACKEND (self), 0);
  klass = DCP_BACKEND_GET_CLASS (self);
  return klass->weights_count != NULL ? klass->weights_count (self) : 0;
}

const char *
dcp_backend_weight_name (DcpBackend *self, guint index, guint64 *nbytes)
{
  g_return_val_if_fail (index < dcp_backend_weights_count (self) && nbytes != NULL, NULL);
  return DCP_BACKEND_GET_CLASS (self)->weight_name (self, index, nbytes);
}

gboolean
dcp_backend_weight_sum (DcpBackend *self, guint index, guint64 *sum, GError **error)
{
  g_return_val_if_fail (index < dcp_backend_weights_count (self) && sum != NULL, FALSE);
  return DCP_BACKEND_GET_CLASS (self)->weight_sum (self, index, sum, error);
}

gboolean
dcp_backend_weight_restore (DcpBackend *self, guint index, const guint8 *bytes, gsize nbytes,
                            GError **error)
{
  g_return_val_if_fail (index < dcp_backend_weights_count (self) && bytes != NULL, FALSE);
  return DCP_BACKEND_GET_CLASS (self)->weight_restore (self, index, bytes, nbytes, error);
}
