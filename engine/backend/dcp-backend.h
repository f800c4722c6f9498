/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib-object.h>

#include "dcp-model-config.h"
#include "dcp-sampler.h"

G_BEGIN_DECLS

/* A backend runs the model: the CPU reference (dcp-backend-cpu.h) or CUDA. The scheduler owns
 * one DcpSeqState per sequence (KV cache of the attention layers, conv and recurrent state of
 * the Gated DeltaNet layers, the MTP head's KV cache) and hands the backend a batch of items per
 * step: each item is one sequence with its own new tokens (one decode token, a draft to verify,
 * or a chunk of its prompt). The backend appends those tokens to the sequence's state and
 * returns logits for the last or for every new position, or draws the next token itself. A
 * state can be copied into another (a snapshot at a reusable prefix; restore by copying back);
 * a verify step can be cut back to its first rows (dcp_backend_state_keep).
 * One thread drives a backend at a time (the engine thread); a backend may use more inside.
 * Positions: each state keeps the next text position, its token count until an image comes.
 * An item may give every new token's mRoPE position (T, H, W) itself, and its own input
 * embedding in place of the token's (an image's rows); after it the next text position is one
 * past the largest position given (docs/MODEL.md "Images in the prompt"). */

#define DCP_TYPE_BACKEND (dcp_backend_get_type ())
G_DECLARE_DERIVABLE_TYPE (DcpBackend, dcp_backend, DCP, BACKEND, GObject)

/* A sequence's state; what is inside belongs to the backend that made it. */
typedef struct _DcpSeqState DcpSeqState;

/* A pool of KV pages shared by many sequences' states (the scheduler's pager decides which
 * pages each state uses; engine/runtime/dcp-kv-pager.h). A page holds page_tokens positions of
 * every attention layer's keys and values. The MTP head's KV stays in the state. */
typedef struct _DcpKvPool DcpKvPool;

/* A sequence's sampler on a backend: the host DcpSampler (parameters, draws, penalty history:
 * the reference every backend's draws follow) and what the backend keeps for it on the device
 * (dcp-backend-sampler.c). */
typedef struct _DcpSeqSampler DcpSeqSampler;

/* What a verify step keeps so that its state can be cut back afterwards
 * (dcp_backend_state_keep): the Gated DeltaNet layers' conv and recurrent state before the step
 * (not the KV, which only needs a shorter count) and the step's inputs to their recurrence, per
 * row. Made by the backend, reused step after step; at most DCP_STEP_SAVE_ROWS rows. */
typedef struct _DcpStepSave DcpStepSave;

#define DCP_STEP_SAVE_ROWS 16

typedef enum {
  DCP_LOGITS_NONE,   /* only fill the state (a prompt chunk that is not the last) */
  DCP_LOGITS_LAST,   /* the last new position: 1 x vocab */
  DCP_LOGITS_ALL,    /* every new position: n_tokens x vocab */
} DcpLogitsMode;

typedef struct {
  DcpSeqState *state;
  const guint32 *tokens;
  guint n_tokens;
  DcpLogitsMode logits_mode;
  float *logits;     /* out: rows x vocab_size, rows by logits_mode; NULL with DCP_LOGITS_NONE */
  float *hidden;     /* out, optional: the final-normed hidden states of the same rows
                        (rows x hidden_size), what the MTP head takes; with row_tokens, of
                        every new row whatever logits_mode says */
  DcpSeqSampler *sampler; /* non-NULL: the backend draws the token that follows the last new
                             position into token (that row is computed whatever logits_mode
                             says; logits_mode says only what comes back besides, raw) */
  const guint32 *banned;  /* with sampler: tokens never drawn in this step */
  guint n_banned;
  const guint32 *allowed; /* with sampler, optional: the only tokens that may be drawn, a
                             bitmask of (vocab_size + 31) / 32 words (bit id % 32 of word
                             id / 32; a grammar's mask); NULL: no constraint */
  guint32 token;          /* out, with sampler */
  guint32 *row_tokens;    /* with sampler, optional (a verify item): out, n_tokens of them, in
                             place of token: row j's draw, the token after new position j,
                             drawn as a one-token step would after tokens[1 .. j] had been
                             generated (they count for the penalties), taking the draw index
                             the (j + 1)-th next draw would. The sampler is left as it was: the
                             caller accepts the tokens it keeps and counts their draws
                             (dcp_backend_sampler_skip_draws). No banned or allowed with it. */
  DcpStepSave *save;      /* optional: the step's GDN state before it and its recurrence inputs
                             go there (n_tokens <= DCP_STEP_SAVE_ROWS), for
                             dcp_backend_state_keep */
  /* Tapped hidden states, optional (what a DFlash drafter reads, engine/backend/
   * dcp-drafter-model.h): with n_tap_layers > 0, taps gets, for every new row whatever
   * logits_mode says, the hidden state after each layer in tap_layers (0-based), side by side:
   * n_tokens x (n_tap_layers x hidden_size), tap j in columns [j H, (j + 1) H). A tap after a
   * layer is its residual stream, except after the last layer: the final-normed state (as
   * transformers' hidden_states give them). Backends whose class sets forward_taps fill it;
   * others refuse an item that asks (NOT_SUPPORTED). */
  const guint *tap_layers;
  guint n_tap_layers;
  float *taps;
  const guint32 *positions;       /* optional: 3 x n_tokens, the T row, then H, then W;
                                        NULL: the state's next positions, T = H = W */
  const float *const *embeddings; /* optional: n_tokens rows of hidden_size values, NULL
                                        rows (or a NULL array) take the token's embedding */
} DcpBatchItem;

/* One sequence's rows for the MTP head (docs/MODEL.md §4): row i combines token
 * tokens[i] (the token after the one at position p_i) with hidden[i] (the main model's
 * final-normed hidden state at p_i, or the MTP's own output when chaining draft steps). Rows are
 * appended to the MTP head's own KV cache in the state, at its next positions. */
typedef struct {
  DcpSeqState *state;
  const guint32 *tokens;
  const float *hidden;      /* n_tokens x hidden_size */
  guint n_tokens;
  DcpLogitsMode logits_mode;
  float *logits;            /* out: rows x vocab_size */
  float *hidden_out;        /* out, optional: the MTP's normed output rows, for chaining */
} DcpMtpItem;

struct _DcpBackendClass {
  GObjectClass parent_class;

  /* A new, empty sequence state. */
  DcpSeqState *(*state_new)          (DcpBackend         *self,
                                      GError            **error);
  void         (*state_free)         (DcpBackend         *self,
                                      DcpSeqState        *state);
  /* dst becomes an exact copy of src (both made by this backend). */
  gboolean     (*state_copy)         (DcpBackend         *self,
                                      DcpSeqState        *dst,
                                      const DcpSeqState  *src,
                                      GError            **error);
  /* Whether forward takes items with positions and embeddings (images); optional, FALSE
   * when absent. */
  gboolean (*takes_embeddings) (DcpBackend *self);
  /* Tokens the main model has read into the state. */
  guint        (*state_get_n_tokens) (DcpBackend         *self,
                                      const DcpSeqState  *state);
  /* Bytes of state the sequence holds now (live KV entries, GDN states). */
  guint64      (*state_get_bytes)    (DcpBackend         *self,
                                      const DcpSeqState  *state);
  /* One step over a batch; items name distinct states. */
  gboolean     (*forward)            (DcpBackend         *self,
                                      DcpBatchItem       *items,
                                      guint               n_items,
                                      GError            **error);
  /* Whether forward fills DcpBatchItem.taps. */
  gboolean      forward_taps;
  /* The MTP head over a batch (NOT_SUPPORTED when the model has none). */
  gboolean     (*mtp_forward)        (DcpBackend         *self,
                                      DcpMtpItem         *items,
                                      guint               n_items,
                                      GError            **error);
  /* Whether the model file carries the MTP head. */
  gboolean     (*has_mtp)            (DcpBackend         *self);
  /* The MTP head's KV keeps its first n_tokens rows (all, where it holds fewer): drafts it
   * chained past the verified ones are dropped. Default: nothing (no MTP head). */
  void (*mtp_rewind) (DcpBackend *self, DcpSeqState *state, guint n_tokens);
  /* Appends the whole state to out as bytes (for the RAM and disk tiers); a device error says
   * so (out is then as it was). */
  gboolean     (*state_save)         (DcpBackend         *self,
                                      const DcpSeqState  *state,
                                      GByteArray         *out,
                                      GError            **error);
  /* state becomes what state_save wrote; bytes of another model or a damaged blob give
   * CORRUPT_FILE and leave state unusable until loaded again or freed. */
  gboolean     (*state_load)         (DcpBackend         *self,
                                      DcpSeqState        *state,
                                      const guint8       *data,
                                      gsize               size,
                                      GError            **error);

  /* What dcp_backend_state_keep needs, for one sequence's verify steps. */
  DcpStepSave *(*step_save_new) (DcpBackend *self, GError **error);
  void (*step_save_free) (DcpBackend *self, DcpStepSave *save);
  /* state, which read the rows of the last step that saved into save, becomes as if it had
   * read only the first n_keep of them (checked by the base class). */
  gboolean (*state_keep) (DcpBackend *self, DcpSeqState *state, DcpStepSave *save, guint n_keep,
                          GError **error);

  /* A pool of n_pages pages (NOT_SUPPORTED: the backend keeps KV in each state). */
  DcpKvPool   *(*kv_pool_new)        (DcpBackend         *self,
                                      guint               n_pages,
                                      guint               page_tokens,
                                      GError            **error);
  void         (*kv_pool_free)       (DcpBackend         *self,
                                      DcpKvPool          *pool);
  /* A new, empty state whose attention KV lives in pool's pages. */
  DcpSeqState *(*state_new_paged)    (DcpBackend         *self,
                                      DcpKvPool          *pool,
                                      GError            **error);
  /* The state's page table (copied): page i holds positions i * page_tokens ... It must cover
   * every position the state holds or is about to be given; states may share pages of a
   * common prefix. state_copy between paged states copies no row that already is shared.
   * INVALID_ARGUMENT: the state is not paged or a page is not in its pool. */
  gboolean     (*state_set_pages)    (DcpBackend         *self,
                                      DcpSeqState        *state,
                                      const guint32      *pages,
                                      guint               n_pages,
                                      GError            **error);
  /* Copies the first n_tokens positions of page src into page dst (copy-on-write); an error
   * (INVALID_ARGUMENT: a page not in the pool, more tokens than a page; a device error) leaves
   * dst unwritten. */
  gboolean     (*kv_pool_copy_page)  (DcpBackend         *self,
                                      DcpKvPool          *pool,
                                      guint               src,
                                      guint               dst,
                                      guint               n_tokens,
                                      GError            **error);

  /* Optional: the backend draws tokens itself in forward (else the base class draws them on the
   * host from the logits rows). What it keeps for one sampler, made when the sampler is: */
  gpointer     (*sampler_data_new)   (DcpBackend         *self,
                                      DcpSampler         *host,
                                      GError            **error);
  void         (*sampler_data_free)  (DcpBackend         *self,
                                      gpointer            data);
  /* Tokens join the sampler's history: generated ones count for every penalty, prompt ones
   * for the repetition penalty. */
  void         (*sampler_data_add)   (DcpBackend         *self,
                                      gpointer            data,
                                      const guint32      *tokens,
                                      guint               n_tokens,
                                      gboolean            generated);

  /* Optional, for the integrity monitor (engine/runtime/dcp-integrity-monitor.h): the weight
   * tensors the backend holds, by index 0 .. weights_count - 1, each with its canonical name
   * and the bytes a check of it reads. */
  guint        (*weights_count)      (DcpBackend         *self);
  const char  *(*weight_name)        (DcpBackend         *self,
                                      guint               index,
                                      guint64            *nbytes);
  /* The checksum (dcp-checksum.h) of tensor index as the backend holds it, in the file's
   * format, summed where it lies (VRAM, RAM). A copy converted when loaded is not in the file's
   * format: its file bytes' sum taken then, or, where the backend can tell that the copy has
   * changed since, a sum that differs from it. An error only when the sum could not be taken
   * (a device error). */
  gboolean     (*weight_sum)         (DcpBackend         *self,
                                      guint               index,
                                      guint64            *sum,
                                      GError            **error);
  /* Rewrites the backend's copy of tensor index from bytes, the tensor as the model file stores
   * it (checked against the index by the caller). */
  gboolean     (*weight_restore)     (DcpBackend         *self,
                                      guint               index,
                                      const guint8       *bytes,
                                      gsize               nbytes,
                                      GError            **error);
};

const char           *dcp_backend_get_name   (DcpBackend        *self);
const DcpModelConfig *dcp_backend_get_config (DcpBackend        *self);
gboolean              dcp_backend_has_mtp    (DcpBackend        *self);
gboolean dcp_backend_takes_embeddings (DcpBackend *self);

DcpSeqState *dcp_backend_state_new          (DcpBackend         *self,
                                             GError            **error);
void         dcp_backend_state_free         (DcpBackend         *self,
                                             DcpSeqState        *state);
gboolean     dcp_backend_state_copy         (DcpBackend         *self,
                                             DcpSeqState        *dst,
                                             const DcpSeqState  *src,
                                             GError            **error);
guint        dcp_backend_state_get_n_tokens (DcpBackend         *self,
                                             const DcpSeqState  *state);
guint64      dcp_backend_state_get_bytes    (DcpBackend         *self,
                                             const DcpSeqState  *state);
gboolean     dcp_backend_forward            (DcpBackend         *self,
                                             DcpBatchItem       *items,
                                             guint               n_items,
                                             GError            **error);
gboolean     dcp_backend_mtp_forward        (DcpBackend         *self,
                                             DcpMtpItem         *items,
                                             guint               n_items,
                                             GError            **error);
void dcp_backend_mtp_rewind (DcpBackend *self, DcpSeqState *state, guint n_tokens);
DcpStepSave *dcp_backend_step_save_new (DcpBackend *self, GError **error);
void dcp_backend_step_save_free (DcpBackend *self, DcpStepSave *save);
/* Cuts a verify step back: state, which read n rows in the last step whose item saved into
 * save, becomes what it would be had it read only the first n_keep (0 .. n) of them: the
 * attention KV count shorter, the GDN conv window and recurrent state recomputed from the state
 * before the step and the saved inputs (no weight is read). INVALID_ARGUMENT: save holds no
 * step of state, or n_keep is over its rows; a device error. Either way save is spent. */
gboolean dcp_backend_state_keep (DcpBackend *self, DcpSeqState *state, DcpStepSave *save,
                                 guint n_keep, GError **error);
gboolean     dcp_backend_state_save         (DcpBackend         *self,
                                             const DcpSeqState  *state,
                                             GByteArray         *out,
                                             GError            **error);
gboolean     dcp_backend_state_load         (DcpBackend         *self,
                                             DcpSeqState        *state,
                                             const guint8       *data,
                                             gsize               size,
                                             GError            **error);

DcpKvPool   *dcp_backend_kv_pool_new        (DcpBackend         *self,
                                             guint               n_pages,
                                             guint               page_tokens,
                                             GError            **error);
void         dcp_backend_kv_pool_free       (DcpBackend         *self,
                                             DcpKvPool          *pool);
DcpSeqState *dcp_backend_state_new_paged    (DcpBackend         *self,
                                             DcpKvPool          *pool,
                                             GError            **error);
gboolean     dcp_backend_state_set_pages    (DcpBackend         *self,
                                             DcpSeqState        *state,
                                             const guint32      *pages,
                                             guint               n_pages,
                                             GError            **error);
gboolean     dcp_backend_kv_pool_copy_page  (DcpBackend         *self,
                                             DcpKvPool          *pool,
                                             guint               src,
                                             guint               dst,
                                             guint               n_tokens,
                                             GError            **error);

/* A sampler for one sequence (an error names a parameter out of range). */
DcpSeqSampler *dcp_backend_sampler_new      (DcpBackend             *self,
                                             const DcpSamplerParams *params,
                                             GError                **error);
void         dcp_backend_sampler_free       (DcpBackend         *self,
                                             DcpSeqSampler      *sampler);
/* Prompt tokens: they count for the repetition penalty. */
void         dcp_backend_sampler_add_prompt (DcpBackend         *self,
                                             DcpSeqSampler      *sampler,
                                             const guint32      *tokens,
                                             guint               n_tokens);
/* A token the sequence generated (drawn or forced): it counts for every penalty. */
void         dcp_backend_sampler_accept     (DcpBackend         *self,
                                             DcpSeqSampler      *sampler,
                                             guint32             token);
/* n draws made elsewhere are counted as taken (row draws a caller keeps); none when greedy. */
void dcp_backend_sampler_skip_draws (DcpBackend *self, DcpSeqSampler *sampler, guint n);
/* A draw on the host from logits the caller holds (a choice that starts from another's
 * logits); the same stream as the backend's draws. */
guint32      dcp_backend_sampler_draw_host  (DcpBackend         *self,
                                             DcpSeqSampler      *sampler,
                                             const float        *logits,
                                             const guint32      *allowed,
                                             const guint32      *banned,
                                             guint               n_banned);

/* The weight tensors the backend can check and restore (0: it cannot); the vfuncs above. */
guint        dcp_backend_weights_count      (DcpBackend         *self);
const char  *dcp_backend_weight_name        (DcpBackend         *self,
                                             guint               index,
                                             guint64            *nbytes);
gboolean     dcp_backend_weight_sum         (DcpBackend         *self,
                                             guint               index,
                                             guint64            *sum,
                                             GError            **error);
gboolean     dcp_backend_weight_restore     (DcpBackend         *self,
                                             guint               index,
                                             const guint8       *bytes,
                                             gsize               nbytes,
                                             GError            **error);

/* For implementations: a step save's common part, first in every backend's DcpStepSave: the
 * state its last step saved, that state's token count before the step, and the rows read. */
typedef struct {
  const DcpSeqState *state;
  guint n_before, n_rows;
} DcpStepSaveHeader;

/* For implementations: the sampler's host half and the backend's data. */
DcpSampler  *dcp_seq_sampler_get_host       (DcpSeqSampler      *sampler);
gpointer     dcp_seq_sampler_get_data       (DcpSeqSampler      *sampler);
/* Whether some item's draws are made on the host: every draw where the backend does not draw,
 * row draws where a penalty is on. */
gboolean dcp_backend_needs_host_draws (DcpBackend *self, const DcpBatchItem *items, guint n_items);
/* The base class's draws on the host, around the backend's forward, for those items. */
gboolean     dcp_backend_forward_host_draws (DcpBackend         *self,
                                             DcpBatchItem       *items,
                                             guint               n_items,
                                             GError            **error);

/* For implementations: the name ("cpu", "cuda") and model config, set once when constructed. */
void         dcp_backend_set_model          (DcpBackend           *self,
                                             const char           *name,
                                             const DcpModelConfig *config);

G_END_DECLS
