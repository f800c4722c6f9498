/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

#include "dcp-drafter.h"
#include "dcp-memory-plan.h"
#include "dcp-model-info.h"

G_BEGIN_DECLS

/* What the launcher knows about one model file from its head (header + metadata): the planner's
 * DcpPlanModel and the measured accuracy. Every cost the launcher shows starts from here
 * (dcp_model_meta_new_from_info is the one place metadata becomes planner input). A local file
 * is read up to the end of its metadata; a remote one is fetched with HTTP Range requests. */

typedef struct {
  double kl_divergence;    /* mean KL(BF16 || this file) per token, nats */
  double top1_agreement;   /* fraction of tokens where the top-1 token is the BF16 model's */
  double perplexity;       /* of this file on the measured text; 0 when the file does not say */
  double reference_perplexity;  /* of the BF16 model on the same text; 0 when not said */
  guint64 tokens;          /* held-out tokens measured; 0 when the file does not say */
  gboolean for_kv;         /* measured with this KV setting (else the weights alone) */
} DcpAccuracy;

typedef struct {
  char *name;              /* file name */
  char *recipe;            /* "medium", or NULL */
  char *architecture;      /* "qwen3_5" (NULL for a drafter) */
  char *model_id;          /* the metadata's source.model_id, or NULL */
  DcpPlanModel plan;       /* for a drafter only file_bytes */
  JsonNode *accuracy;      /* the metadata's "accuracy" object, or NULL (not measured) */
  DcpDrafterInfo *drafter; /* set when the file is a drafter (a "drafter" member), not a model */
} DcpModelMeta;

DcpModelMeta *dcp_model_meta_new_from_info (const DcpModelInfo *info,
                                            const char         *name,
                                            GError            **error);
void          dcp_model_meta_free          (DcpModelMeta       *meta);
/* The accuracy for KV bits k/v: the metadata's "kv" entry for "k/v" when measured, else the
 * weights' own numbers (for_kv FALSE). FALSE when the file has no accuracy section. */
gboolean      dcp_model_meta_get_accuracy  (const DcpModelMeta *meta,
                                            guint               kv_bits_k,
                                            guint               kv_bits_v,
                                            DcpAccuracy        *accuracy);
/* Reads the head of a local file (not the tensors): a model's, or a drafter's (meta->drafter). */
DcpModelMeta *dcp_model_meta_load          (const char         *path,
                                            GError            **error);
/* Fetches the head of a remote file: one Range request of the first 256 KiB, and a second one
 * only if the metadata is longer; token (or NULL) goes to endpoint's host only, so a gated
 * model's head can be read before any download. */
void          dcp_model_meta_fetch_async   (SoupSession        *session,
                                            const char         *url,
                                            const char         *endpoint,
                                            const char         *token,
                                            GCancellable       *cancellable,
                                            GAsyncReadyCallback callback,
                                            gpointer            user_data);
DcpModelMeta *dcp_model_meta_fetch_finish  (GAsyncResult       *result,
                                            GError            **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelMeta, dcp_model_meta_free)

G_END_DECLS
