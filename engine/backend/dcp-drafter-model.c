/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter-model"

#include "config.h"

#include "dcp-backend-cpu.h"
#include "dcp-drafter-model-private.h"
#include "dcp-error.h"
#include "dcp-memory-plan.h"
#if HAVE_CUDA
#include "dcp-backend-cuda.h"
#endif

/* The DFlash drafter's API (dcp-drafter-model.h): the checks every backend shares, then the
 * target backend's implementation (dcp-cpu-dflash.c, dcp-cuda-dflash.c). */

DcpDrafterModel *
dcp_drafter_model_open (DcpBackend *target, const char *path, GError **error)
{
  g_autoptr(DcpModelFile) file = NULL;

  g_return_val_if_fail (DCP_IS_BACKEND (target) && path != NULL, NULL);
  file = dcp_model_file_open_drafter (path, error);
  if (file == NULL ||
      !dcp_drafter_config_check_target (dcp_model_file_get_drafter (file),
                                        dcp_backend_get_config (target), error))
    return NULL;
  if (DCP_IS_BACKEND_CPU (target))
    return dcp_cpu_dflash_open (target, g_steal_pointer (&file), error);
#if HAVE_CUDA
  if (DCP_IS_BACKEND_CUDA (target))
    return dcp_cuda_dflash_open (target, g_steal_pointer (&file), error);
#endif
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
               "the DFlash drafter runs on the CPU and CUDA backends; the %s backend has none",
               dcp_backend_get_name (target));
  return NULL;
}

void
dcp_drafter_model_free (DcpDrafterModel *self)
{
  if (self == NULL)
    return;
  self->klass->clear (self);
  g_clear_pointer (&self->file, dcp_model_file_free);
  g_free (self);
}

const DcpDrafterConfig *
dcp_drafter_model_get_config (DcpDrafterModel *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->config;
}

const guint *
dcp_drafter_model_get_taps (DcpDrafterModel *self, guint *n_taps)
{
  g_return_val_if_fail (self != NULL && n_taps != NULL, NULL);
  *n_taps = self->config.n_taps;
  return self->config.tap_layers;
}

guint
dcp_drafter_state_capacity (guint n_tokens)
{
  return (n_tokens + DCP_PAGE_TOKENS - 1) / DCP_PAGE_TOKENS * DCP_PAGE_TOKENS;
}

void
dcp_drafter_rope_init (DcpRope *rope, const DcpDrafterConfig *c)
{
  DcpModelConfig rope_config = { 0 };

  rope_config.rotary_dim = c->head_dim;
  rope_config.rope_theta = c->rope_theta;
  rope_config.rope_type = DCP_ROPE_DEFAULT;
  dcp_rope_init (rope, &rope_config);
}

void
dcp_drafter_layer_names_init (DcpDrafterLayerNames *n, guint l)
{
  n->input_norm = g_strdup_printf ("layers.%u.input_layernorm.weight", l);
  n->post_norm = g_strdup_printf ("layers.%u.post_attention_layernorm.weight", l);
  n->q_norm = g_strdup_printf ("layers.%u.self_attn.q_norm.weight", l);
  n->k_norm = g_strdup_printf ("layers.%u.self_attn.k_norm.weight", l);
  n->q = g_strdup_printf ("layers.%u.self_attn.q_proj.weight", l);
  n->k = g_strdup_printf ("layers.%u.self_attn.k_proj.weight", l);
  n->v = g_strdup_printf ("layers.%u.self_attn.v_proj.weight", l);
  n->o = g_strdup_printf ("layers.%u.self_attn.o_proj.weight", l);
  n->gate = g_strdup_printf ("layers.%u.mlp.gate_proj.weight", l);
  n->up = g_strdup_printf ("layers.%u.mlp.up_proj.weight", l);
  n->down = g_strdup_printf ("layers.%u.mlp.down_proj.weight", l);
}

void
dcp_drafter_layer_names_clear (DcpDrafterLayerNames *n)
{
  char **all[] = { &n->input_norm, &n->post_norm, &n->q_norm, &n->k_norm, &n->q, &n->k, &n->v,
                   &n->o, &n->gate, &n->up, &n->down };

  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    g_clear_pointer (all[i], g_free);
}

DcpDrafterState *
dcp_drafter_state_new (DcpDrafterModel *model)
{
  DcpDrafterState *s;

  g_return_val_if_fail (model != NULL, NULL);
  s = g_new0 (DcpDrafterState, 1);
  s->model = model;
  s->k = g_new0 (float *, model->config.n_layers);
  s->v = g_new0 (float *, model->config.n_layers);
  return s;
}

void
dcp_drafter_state_free (DcpDrafterState *s)
{
  if (s == NULL)
    return;
  s->model->klass->state_clear (s);
  g_free (s->k);
  g_free (s->v);
  g_free (s);
}

guint
dcp_drafter_state_get_n_tokens (const DcpDrafterState *s)
{
  g_return_val_if_fail (s != NULL, 0);
  return s->n_tokens;
}

void
dcp_drafter_state_truncate (DcpDrafterState *s, guint n_tokens)
{
  g_return_if_fail (s != NULL);
  s->n_tokens = MIN (s->n_tokens, n_tokens);
}

guint64
dcp_drafter_state_get_bytes (const DcpDrafterState *s)
{
  g_return_val_if_fail (s != NULL, 0);
  return s->model->klass->state_get_bytes (s);
}

gboolean
dcp_drafter_model_add_context (DcpDrafterModel *self, DcpDrafterState *s, const float *taps,
                               guint n_rows, GError **error)
{
  g_return_val_if_fail (self != NULL && s != NULL && s->model == self, FALSE);
  g_return_val_if_fail (taps != NULL || n_rows == 0, FALSE);
  if (n_rows == 0)
    return TRUE;
  return self->klass->add_context (self, s, taps, n_rows, error);
}

gboolean
dcp_drafter_model_propose (DcpDrafterModel *self, DcpDrafterState *s, guint32 anchor,
                           guint n_drafts, guint32 *drafts, float *confidence, float *logits,
                           GError **error)
{
  const DcpDrafterConfig *c;

  g_return_val_if_fail (self != NULL && s != NULL && s->model == self, FALSE);
  g_return_val_if_fail (drafts != NULL && confidence != NULL, FALSE);
  c = &self->config;
  if (n_drafts == 0 || n_drafts >= c->block_size || anchor >= c->target_vocab_size)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "DFlash propose: %u drafts after token %u (1 to %u drafts, tokens below %u)",
                   n_drafts, anchor, c->block_size - 1, c->target_vocab_size);
      return FALSE;
    }
  return self->klass->propose (self, s, anchor, n_drafts, drafts, confidence, logits, error);
}
