/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-ops.h"
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

/* A weight tensor as the weights hold it, for the integrity monitor: a matrix in the file's
 * format, where the slots point (two when the embedding is also the LM head), or a small vector
 * dequantized to FP32 at load (its layout in the file, its FP32 copy, that copy's sum and its
 * file bytes' sum then). */
typedef struct {
  char *name;
  guint64 nbytes;                /* as the file stores it */
  const guint8 **slots[2];       /* a matrix: the data fields that point at its bytes */
  guint8 *restored;              /* a matrix read again from the file: its bytes now */
  DcpCpuMatrix layout;           /* a vector: its dtype and shape in the file */
  float *fp32;                   /* a vector: its FP32 copy (in owned) */
  guint64 fp32_sum;
  guint64 file_sum;
} DcpCpuStoredTensor;

typedef struct {
  DcpModelConfig config;
  DcpRope rope;                  /* the attention layers' (and MTP's) rotary table */
  DcpCpuMatrix embed, lm_head;
  float *norm;                   /* final norm, [hidden], zero-centred */
  DcpCpuLayer *layers;           /* config.n_layers */
  gboolean has_mtp;
  DcpCpuMtpWeights mtp;
  GPtrArray *owned;              /* the FP32 vectors above */
  GArray *stored;                /* DcpCpuStoredTensor, in load order */
} DcpCpuWeights;

/* Looks up and checks the shape of every tensor the text model (and the MTP head, when the
 * source has mtp.fc.weight) needs. */
DcpCpuWeights *dcp_cpu_weights_load (const DcpModelConfig  *config,
                                     const DcpTensorSource *source,
                                     GError               **error);
void           dcp_cpu_weights_free (DcpCpuWeights         *self);
/* The checksum of stored tensor index: a matrix's bytes summed; a vector's file bytes' sum
 * at load while its FP32 copy is as it was, that sum plus one once the copy has changed. */
guint64        dcp_cpu_weights_sum     (DcpCpuWeights   *self,
                                        guint            index);
/* Stored tensor index from bytes (the tensor as the file stores it): a matrix's slots point at
 * a copy of them, a vector is dequantized again. CORRUPT_FILE when the size is not the file's. */
gboolean       dcp_cpu_weights_restore (DcpCpuWeights   *self,
                                        guint            index,
                                        const guint8    *bytes,
                                        gsize            nbytes,
                                        GError         **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCpuWeights, dcp_cpu_weights_free)

G_END_DECLS
