/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-ops.h"
#include "dcp-cpu-stored.h"
#include "dcp-model-config.h"
#include "dcp-rope.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* The CPU backend's view of the model's weights. Matrices stay in the source's format and are
 * dequantized row block by row block as they are used; small vectors (norms, A_log, dt_bias,
 * the conv kernel) are dequantized once, to FP32, at load. */

typedef struct {
  DcpCpuMatrix q, k, v, o;       /* q rows: per head [query head_dim | gate head_dim] */
  float *q_norm, *k_norm;        /* [head_dim], zero-centred */
} DcpCpuAttentionWeights;

typedef struct {
  DcpCpuMatrix qkv, z, b, a, out;
  float *conv;                   /* [conv_dim, kernel] */
  float *a_log, *dt_bias;        /* [n_value_heads] */
  float *norm;                   /* [value_head_dim], plain weight */
} DcpCpuGdnWeights;

typedef struct {
  gboolean is_full_attention;
  float *input_norm, *post_norm; /* [hidden], zero-centred */
  DcpCpuAttentionWeights attn;   /* when is_full_attention */
  DcpCpuGdnWeights gdn;          /* otherwise */
  DcpCpuMatrix gate, up, down;
} DcpCpuLayer;

typedef struct {
  float *pre_fc_norm_embedding, *pre_fc_norm_hidden, *norm;  /* [hidden], zero-centred */
  DcpCpuMatrix fc;               /* [hidden, 2 hidden]: input [norm(embedding) | norm(hidden)] */
  DcpCpuLayer layer;             /* a full-attention decoder layer */
} DcpCpuMtpWeights;

typedef struct {
  DcpModelConfig config;
  DcpRope rope;                  /* the attention layers' (and MTP's) rotary table */
  DcpCpuMatrix embed, lm_head;
  float *norm;                   /* final norm, [hidden], zero-centred */
  DcpCpuLayer *layers;           /* config.n_layers */
  gboolean has_mtp;
  DcpCpuMtpWeights mtp;
  GPtrArray *owned;              /* the FP32 vectors above */
  GArray *stored;                /* DcpCpuStoredTensor (dcp-cpu-stored.h), in load order */
} DcpCpuWeights;

/* Looks up and checks the shape of every tensor the text model (and the MTP head, when the
 * source has mtp.fc.weight) needs. */
DcpCpuWeights *dcp_cpu_weights_load (const DcpModelConfig  *config,
                                     const DcpTensorSource *source,
                                     GError               **error);
void           dcp_cpu_weights_free (DcpCpuWeights         *self);
/* dcp_cpu_stored_sum and dcp_cpu_stored_restore of stored tensor index. */
guint64 dcp_cpu_weights_sum (DcpCpuWeights *self, guint index);
gboolean       dcp_cpu_weights_restore (DcpCpuWeights   *self,
                                        guint            index,
                                        const guint8    *bytes,
                                        gsize            nbytes,
                                        GError         **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCpuWeights, dcp_cpu_weights_free)

G_END_DECLS
