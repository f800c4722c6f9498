/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-tokenizer.h"

G_BEGIN_DECLS

/* Incremental decoding for streaming: ids go in one at a time, and only complete UTF-8 comes
 * out. Bytes that begin a character whose remaining bytes have not arrived yet are held back;
 * bytes that can never become a character come out as U+FFFD at once. flush() ends the stream:
 * a held-back incomplete character becomes one U+FFFD. The concatenation of everything pushed
 * and flushed equals dcp_tokenizer_decode() of all the ids with the same flags. */
typedef struct _DcpTokenStream DcpTokenStream;

DcpTokenStream *dcp_token_stream_new   (DcpTokenizer            *tokenizer,
                                        DcpTokenizerDecodeFlags  flags);
void            dcp_token_stream_free  (DcpTokenStream          *self);
/* Appends the text that id completes to out; returns how many bytes were appended. */
gsize           dcp_token_stream_push  (DcpTokenStream          *self,
                                        guint32                  id,
                                        GString                 *out);
/* Appends what is held back (as U+FFFD) and resets the stream; returns the bytes appended. */
gsize           dcp_token_stream_flush (DcpTokenStream          *self,
                                        GString                 *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTokenStream, dcp_token_stream_free)

G_END_DECLS
