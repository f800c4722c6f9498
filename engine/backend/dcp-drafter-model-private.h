/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-drafter-model.h"
#include "dcp-model-file.h"
#include "dcp-rope.h"

G_BEGIN_DECLS

/* A backend's DFlash drafter behind dcp-drafter-model.h: dcp-drafter-model.c opens the file,
 * checks it against the target and hands it to the backend's open; the public calls dispatch
 * through the class. An implementation's model struct starts with DcpDrafterModel; states are
 * the shared struct below, their blocks in the implementation's memory. */
typedef struct {
  /* frees what the implementation owns (the struct and the file are freed after) */
  void     (*clear)           (DcpDrafterModel       *model);
  /* frees the state's per-layer blocks (the arrays and the struct are freed after) */
  void     (*state_clear)     (DcpDrafterState       *state);
  guint64  (*state_get_bytes) (const DcpDrafterState *state);
  /* arguments checked: n_rows >= 1 */
  gboolean (*add_context)     (DcpDrafterModel       *model,
                               DcpDrafterState       *state,
                               const float           *taps,
                               guint                  n_rows,
                               GError               **error);
  /* arguments checked: 1 <= n_drafts < block_size, anchor in the vocabulary */
  gboolean (*propose)         (DcpDrafterModel       *model,
                               DcpDrafterState       *state,
                               guint32                anchor,
                               guint                  n_drafts,
                               guint32               *drafts,
                               float                 *confidence,
                               float                 *logits,
                               GError               **error);
} DcpDrafterModelClass;

struct _DcpDrafterModel {
  const DcpDrafterModelClass *klass;
  DcpModelFile *file;
  DcpDrafterConfig config;
};

/* Per drafter layer, room for cap rows of context keys (normed and turned) and values, in the
 * implementation's memory (host or device; NULL until the first rows), n_tokens of them in
 * use: truncate only lowers it. */
struct _DcpDrafterState {
  DcpDrafterModel *model;
  guint n_tokens, cap;
  float **k, **v;
};

/* The tensor names of drafter layer l. */
typedef struct {
  char *input_norm, *post_norm, *q_norm, *k_norm, *q, *k, *v, *o, *gate, *up, *down;
} DcpDrafterLayerNames;

/* The rows a state grows to for n_tokens: whole pages of the KV pool (DCP_PAGE_TOKENS), so that
 * a context holds at most a page more than its rows, as the memory plan counts it. */
guint dcp_drafter_state_capacity   (guint                   n_tokens);
/* Qwen3's rotary table: default RoPE over the whole head, the config's theta. */
void dcp_drafter_rope_init         (DcpRope                *rope,
                                    const DcpDrafterConfig *config);

void dcp_drafter_layer_names_init  (DcpDrafterLayerNames *names,
                                    guint                 l);
void dcp_drafter_layer_names_clear (DcpDrafterLayerNames *names);

/* The implementations: the model (its parent filled in: klass, file, config) with the
 * drafter's weights loaded for the target. file is the model's from the start (freed with it,
 * also when this fails). */
DcpDrafterModel *dcp_cpu_dflash_open  (DcpBackend   *target,
                                       DcpModelFile *file,
                                       GError      **error);
DcpDrafterModel *dcp_cuda_dflash_open (DcpBackend   *target,
                                       DcpModelFile *file,
                                       GError      **error);

G_END_DECLS
