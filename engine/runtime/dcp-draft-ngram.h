/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The ngram drafter (prompt lookup, no weights): the longest suffix of tokens[0..n), of
 * max_match down to 1 tokens, that also occurs earlier in them; the tokens that followed its
 * latest earlier occurrence, at most max_drafts, go to out. Returns how many (0: no match). */
guint dcp_draft_ngram (const guint32 *tokens,
                       guint          n,
                       guint          max_match,
                       guint          max_drafts,
                       guint32       *out);

G_END_DECLS
