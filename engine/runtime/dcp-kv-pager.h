/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-error.h"

G_BEGIN_DECLS

/* The attention KV pool's page allocator: n_pages pages of page_tokens tokens (every attention
 * layer's K and V for those positions), shared by all sequences. Each sequence has a page table;
 * pages are refcounted, so a sequence forked from another (a snapshot, a shared opening) shares
 * the pages of the common prefix. A shared page that is only partly filled is copied when one of
 * its holders writes into it (copy-on-write): dcp_kv_pager_seq_reserve reports the copies the
 * caller must make. Pure host bookkeeping: the backend stores the data, the pager says where.
 * A sequence's page table (seq_get_page) is what a backend's state gets (state_set_pages). */

typedef struct _DcpKvPager DcpKvPager;

/* One page to copy before a write: the first n_tokens tokens of page src into page dst. */
typedef struct {
  guint src, dst, n_tokens;
} DcpKvPageCopy;

DcpKvPager *dcp_kv_pager_new             (guint             n_pages,
                                          guint             page_tokens);
void        dcp_kv_pager_free            (DcpKvPager       *self);
guint       dcp_kv_pager_get_n_pages     (const DcpKvPager *self);
guint       dcp_kv_pager_get_page_tokens (const DcpKvPager *self);
guint       dcp_kv_pager_get_n_free      (const DcpKvPager *self);

/* A new sequence with an empty table; returns its id (ids are reused after free). */
guint       dcp_kv_pager_seq_new         (DcpKvPager       *self);
/* A new sequence whose first n_tokens are those of src (n_tokens <= src's), sharing its pages. */
guint       dcp_kv_pager_seq_fork        (DcpKvPager       *self,
                                          guint             src,
                                          guint             n_tokens);
/* Drops the sequence's references; pages nobody holds go back to the pool. */
void        dcp_kv_pager_seq_free        (DcpKvPager       *self,
                                          guint             seq);
guint       dcp_kv_pager_seq_get_n_tokens (const DcpKvPager *self,
                                           guint             seq);
guint       dcp_kv_pager_seq_get_n_pages (const DcpKvPager *self,
                                          guint             seq);
/* Pages only seq holds: what freeing it gives back to the pool. */
guint       dcp_kv_pager_seq_pages_owned (const DcpKvPager *self,
                                          guint             seq);
/* Pages that growing seq to n_tokens would take from the pool (copy-on-write included). */
guint       dcp_kv_pager_seq_pages_needed (const DcpKvPager *self,
                                           guint             seq,
                                           guint             n_tokens);
/* Grows seq to hold n_tokens tokens. Copies the caller must make first are appended to copies
 * (may be NULL when the caller knows there are none). OUT_OF_MEMORY and no change when the
 * pool has too few free pages. */
gboolean    dcp_kv_pager_seq_reserve     (DcpKvPager       *self,
                                          guint             seq,
                                          guint             n_tokens,
                                          GArray           *copies,
                                          GError          **error);
/* Shrinks seq to n_tokens tokens (a rejected draft), freeing whole pages past the end. */
void        dcp_kv_pager_seq_truncate    (DcpKvPager       *self,
                                          guint             seq,
                                          guint             n_tokens);
/* Page i of the sequence's table. */
guint       dcp_kv_pager_seq_get_page    (const DcpKvPager *self,
                                          guint             seq,
                                          guint             i);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpKvPager, dcp_kv_pager_free)

G_END_DECLS
