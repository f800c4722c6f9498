/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cuda-stored.h"
#include "dcp-dtype.h"
#include "dcp-kernels.h"
#include "dcp-model-config.h"
#include "dcp-recipe.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* The CUDA backend's weights, all in VRAM, uploaded once. Matrices keep their stored format
 * (BF16 or an MX format, the planar layout of dcp-quant.h; F32/F16 matrices become BF16);
 * norms are BF16 (what the RMSNorm kernels read), the GDN vectors FP32, the conv kernel BF16,
 * the embedding table BF16 (dequantized at upload when stored in a block format). */

typedef struct {
  DcpkFormat format;
  int rows, cols;
  void *data;                    /* device */
} DcpCudaMatrix;

/* Projections of one input, parts of rows[i] rows each. Consecutive parts of one format are
 * fused into one matrix whose rows are theirs one after another (a "run": one product for all
 * of them); the GDN in_proj of the medium recipe is two runs, [qkv | z] in MXFP4 and [b | a] in
 * BF16. */
#define DCP_CUDA_MAX_PARTS 4
typedef struct {
  guint n_parts, n_runs;
  int rows[DCP_CUDA_MAX_PARTS];
  DcpCudaMatrix runs[DCP_CUDA_MAX_PARTS];
} DcpCudaProj;

typedef struct {
  gboolean is_full_attention;
  guint16 *input_norm, *post_norm;
  DcpCudaMatrix q, k, v, o;      /* attention: q rows per head [query | gate] */
  guint16 *q_norm, *k_norm;
  DcpCudaProj in_proj;           /* GDN: in_proj_qkv | in_proj_z | in_proj_b | in_proj_a */
  DcpCudaMatrix out;
  DcpkGdnWeights gdn;
  DcpCudaProj gate_up;           /* gate | up */
  DcpCudaMatrix down;
} DcpCudaLayer;

/* What the backend and its forward take from the config, derived once with the weights: layer
 * counts, one GDN layer's state and the per-row widths of the activations. */
typedef struct {
  guint n_gdn, n_attn;
  gsize conv_floats, recurrent_floats;   /* one GDN layer's conv and recurrent state */
  gsize conv_dim, vd, hv;                /* GDN qkv, values (all heads), value heads */
  gsize qd, kvd;                         /* attention queries, keys (all heads) */
  gsize proj_width;                      /* the widest projection: GDN in_proj or gate+up */
  DcpkGdnShape gdn_shape;
} DcpCudaCounts;

/* The MTP head (docs/MODEL.md §4): fc over [norm(embedding) | norm(hidden)], one
 * full-attention decoder layer, its final norm; the embedding and lm_head are the model's. */
typedef struct {
  guint16 *pre_fc_norm_embedding, *pre_fc_norm_hidden, *norm;
  DcpCudaMatrix fc;              /* [hidden, 2 hidden] */
  DcpCudaLayer layer;
} DcpCudaMtpWeights;

typedef struct {
  DcpModelConfig config;
  DcpCudaCounts counts;
  guint16 *embed;                /* BF16 [vocab, hidden] */
  DcpCudaMatrix lm_head;
  guint16 *norm;
  DcpCudaLayer *layers;
  gboolean has_mtp;              /* the source has mtp.fc.weight */
  DcpCudaMtpWeights mtp;
  GPtrArray *allocations;        /* device pointers, freed with the weights */
  GArray *stored;                /* DcpCudaStoredTensor (dcp-cuda-stored.h; random weights:
                                  * random.N) */
  guint64 device_bytes;          /* all of it */
  guint64 gemv_bytes;            /* what one decode step's GEMVs read (not the MTP head's) */
} DcpCudaWeights;

/* The kernels' format of a matrix stored as dtype (BF16 and the MX formats); FALSE for the
 * others (F32, F16: converted to BF16 when uploaded). */
gboolean dcp_cuda_format_of (DcpDType dtype, DcpkFormat *format);
/* Every tensor of the text model from source (and of the MTP head, when the source has
 * mtp.fc.weight), each upload checked with dcpk_checksum against the host bytes. */
DcpCudaWeights *dcp_cuda_weights_upload (const DcpModelConfig  *config,
                                         const DcpTensorSource *source,
                                         GError               **error);
/* Random weights of config's shapes made on the device (benchmarks), each matrix in the format
 * recipe gives its tensor group (fused as the upload fuses them), values of a plausible
 * scale. */
DcpCudaWeights *dcp_cuda_weights_random_recipe (const DcpModelConfig *config,
                                                DcpRecipe             recipe,
                                                guint64               seed,
                                                GError              **error);
void            dcp_cuda_weights_free   (DcpCudaWeights        *self);
/* The tensors of another file (a DFlash drafter's), uploaded with the same checks: an empty set
 * that owns what is added to it (its config and layers stay empty). Matrices as the model's
 * (stored format; fused parts for a projection), vectors in FP32. */
DcpCudaWeights *dcp_cuda_weights_new_set    (void);
gboolean        dcp_cuda_weights_add_matrix (DcpCudaWeights        *w,
                                             const DcpTensorSource *source,
                                             const char            *name,
                                             guint64                rows,
                                             guint64                cols,
                                             DcpCudaMatrix         *m,
                                             GError               **error);
gboolean        dcp_cuda_weights_add_proj   (DcpCudaWeights        *w,
                                             const DcpTensorSource *source,
                                             const char *const     *names,
                                             const guint64         *rows,
                                             guint                  n,
                                             guint64                cols,
                                             DcpCudaProj           *p,
                                             GError               **error);
float          *dcp_cuda_weights_add_vector (DcpCudaWeights        *w,
                                             const DcpTensorSource *source,
                                             const char            *name,
                                             guint64                n,
                                             GError               **error);
/* The n matrices parts[i] (rows[i] x cols each, dtype BF16 or MX, the layout of dcp-quant.h)
 * stacked into one (sum of rows) x cols matrix of the same layout: for MX formats the element
 * planes one after another, then, at the stacked tensor's scale offset, the scale planes. */
guint8         *dcp_cuda_weights_fuse   (DcpDType               dtype,
                                         const guint8 *const   *parts,
                                         const int             *rows,
                                         guint                  n,
                                         int                    cols,
                                         gsize                 *nbytes);

/* One matrix product of a caller (a decode step's GEMV, a prompt pass's GEMM): y [rows, m's
 * rows] = x [rows, m's cols] times m transposed; a CUDA error as int. */
typedef int (*DcpCudaMatmulFn) (gpointer               user,
                                const DcpCudaMatrix   *m,
                                const float           *x,
                                int                    rows,
                                float                 *y);
/* The projections of p on x into out [rows, sum of p's rows], the parts side by side in each
 * row: one product per run, through tmp (a run's output) on stream when p has several runs and
 * rows > 1. */
int             dcp_cuda_proj_rows      (const DcpCudaProj     *p,
                                         DcpCudaMatmulFn        mul,
                                         gpointer               user,
                                         const float           *x,
                                         int                    rows,
                                         float                 *out,
                                         float                 *tmp,
                                         void                  *stream);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCudaWeights, dcp_cuda_weights_free)

G_END_DECLS
