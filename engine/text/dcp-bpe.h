/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The byte-level BPE model of a tokenizer: the id of each of the 256 bytes and the merge
 * table, applied to one pre-tokenized word at a time. A word starts as one symbol per byte; the
 * adjacent pair with the lowest merge rank is merged first (leftmost on ties), as Hugging Face
 * tokenizers does. Results for short words are cached; the cache is guarded by a mutex, so one
 * DcpBpe may encode from several threads. */
typedef struct _DcpBpe DcpBpe;

typedef struct {
  guint32 left;    /* id of the left symbol */
  guint32 right;   /* id of the right symbol */
  guint32 merged;  /* id of the token the pair becomes */
} DcpBpeMerge;

/* merges[i] has rank i; a pair listed twice keeps its last entry. */
DcpBpe *dcp_bpe_new          (const guint32      byte_ids[256],
                              const DcpBpeMerge *merges,
                              gsize              n_merges);
void    dcp_bpe_free         (DcpBpe            *self);
/* Appends the ids (guint32) of word to ids. */
void    dcp_bpe_encode_word  (DcpBpe            *self,
                              const guint8      *word,
                              gsize              len,
                              GArray            *ids);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpBpe, dcp_bpe_free)

G_END_DECLS
