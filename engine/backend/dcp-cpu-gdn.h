/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-weights.h"

G_BEGIN_DECLS

/* What one Gated DeltaNet layer keeps for one sequence, whatever its length. */
typedef struct {
  guint conv_dim, conv_width;    /* conv_width = kernel - 1 */
  guint n_value_heads, key_dim, value_dim;
  float *conv;                   /* [conv_dim, kernel - 1]: the last pre-conv inputs, oldest first */
  float *state;                  /* [n_value_heads, key_dim, value_dim], FP32 */
} DcpCpuGdnState;

void  dcp_cpu_gdn_state_init  (DcpCpuGdnState       *state,
                               const DcpModelConfig *config);
void  dcp_cpu_gdn_state_clear (DcpCpuGdnState       *state);
void  dcp_cpu_gdn_state_copy  (DcpCpuGdnState       *dst,
                               const DcpCpuGdnState *src);

/* What a verify step saves of one GDN layer so that it can be cut back: the state before the
 * step and, per row, the pre-conv inputs (the conv window) and the recurrence's inputs (q, k,
 * v after the conv and norms, beta, g), for up to max_rows rows. */
typedef struct {
  DcpCpuGdnState before;
  guint max_rows, key_width; /* key_width = n_key_heads * key_dim */
  float *mixed;              /* [max_rows, conv_dim] */
  float *q, *k;              /* [max_rows, key_width] */
  float *v;                  /* [max_rows, n_value_heads * value_dim] */
  float *beta, *g;           /* [max_rows, n_value_heads] */
} DcpCpuGdnSave;

void dcp_cpu_gdn_save_init (DcpCpuGdnSave *save, const DcpModelConfig *config, guint max_rows);
void dcp_cpu_gdn_save_clear (DcpCpuGdnSave *save);
/* state, which read rows that were saved into save, becomes as if it had read only the first
 * n_keep of them (through the same form of the rule a forward of n_keep rows takes). */
void dcp_cpu_gdn_keep (DcpCpuPool *pool, const DcpModelConfig *config, const DcpCpuGdnSave *save,
                       DcpCpuGdnState *state, guint n_keep, guint chunk_size);

/* The gated delta rule over n_tokens (docs/MODEL.md §2.3 step 7 and §5), on inputs that
 * are already convolved, L2-normed and (q) scaled. Value head j reads key head
 * j / (n_value_heads / n_key_heads). */
typedef struct {
  guint n_tokens, n_key_heads, n_value_heads, key_dim, value_dim;
  const float *q, *k;            /* [n_tokens, n_key_heads, key_dim] */
  const float *v;                /* [n_tokens, n_value_heads, value_dim] */
  const float *beta, *g;         /* [n_tokens, n_value_heads]; g is the log decay (<= 0) */
  float *state;                  /* [n_value_heads, key_dim, value_dim], updated in place */
  float *out;                    /* [n_tokens, n_value_heads, value_dim] */
} DcpCpuDeltaRule;

/* Token by token: decay, delta update, read (the ground truth). */
void  dcp_cpu_delta_rule_recurrent (DcpCpuPool            *pool,
                                    const DcpCpuDeltaRule *rule);
/* The chunked (WY) form with chunks of chunk_size tokens, the last one ragged. */
void  dcp_cpu_delta_rule_chunked   (DcpCpuPool            *pool,
                                    const DcpCpuDeltaRule *rule,
                                    guint                  chunk_size);

/* The whole layer on n_tokens normed hidden states h [n_tokens, hidden]: projections, causal
 * conv + SiLU, L2 norms, beta and g, the delta rule (chunked with chunk_size when more than one
 * token and chunk_size > 0, else recurrent), gated RMSNorm, out_proj into out. save (optional,
 * n_tokens <= its max_rows) gets the state before and the rows' inputs. */
void dcp_cpu_gdn_forward (DcpCpuPool *pool, const DcpModelConfig *config, const DcpCpuGdnWeights *w,
                          DcpCpuGdnState *state, const float *h, guint n_tokens, guint chunk_size,
                          DcpCpuGdnSave *save, float *out);

G_END_DECLS
