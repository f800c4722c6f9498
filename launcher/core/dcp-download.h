/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

/* One file downloaded over HTTP(S) the way model files need it: up to 8 range requests at once,
 * progress as properties, resume after an interruption (the ranges done are kept beside the
 * partial file, DEST.part.json), retries of a dropped connection for up to a minute, and a SHA-256 check before the
 * file takes its final name. A half-downloaded file never sits under the final name. */

#define DCP_TYPE_DOWNLOAD (dcp_download_get_type ())
G_DECLARE_FINAL_TYPE (DcpDownload, dcp_download, DCP, DOWNLOAD, GObject)

/* sha256: expected lowercase hex digest, or NULL to skip the check. */
DcpDownload *dcp_download_new            (SoupSession         *session,
                                          const char          *url,
                                          const char          *dest_path,
                                          const char          *sha256);
void         dcp_download_set_max_connections (DcpDownload    *self,
                                          guint                n);
void         dcp_download_run_async      (DcpDownload         *self,
                                          GCancellable        *cancellable,
                                          GAsyncReadyCallback  callback,
                                          gpointer             user_data);
gboolean     dcp_download_run_finish     (DcpDownload         *self,
                                          GAsyncResult        *result,
                                          GError             **error);
guint64      dcp_download_get_size       (DcpDownload         *self);
guint64      dcp_download_get_received   (DcpDownload         *self);
/* Bytes per second over the last seconds (0 until known), and the seconds left at that speed
 * (-1 while unknown). */
double       dcp_download_get_speed      (DcpDownload         *self);
double       dcp_download_get_seconds_left (DcpDownload       *self);
/* A Hugging Face token: sent as "Authorization: Bearer TOKEN", only to URLs on the host of
 * endpoint (the Hugging Face endpoint), never to another host. NULL or "" for none. */
void         dcp_download_set_token      (DcpDownload         *self,
                                          const char          *endpoint,
                                          const char          *token);

/* What an interrupted download of dest_path kept (its DEST.part.json): bytes on disk and the
 * file's size. FALSE when nothing is kept. */
gboolean     dcp_download_get_kept      (const char          *dest_path,
                                         guint64             *kept,
                                         guint64             *size);
/* A session for downloads and the catalogue: 8 connections per host (libsoup's default is 2). */
SoupSession *dcp_download_session_new  (void);
/* How long after a part's first dropped connection it keeps trying before that is an error
 * (default a minute; tries wait 0.5 s doubling up to 8 s). */
void         dcp_download_set_retry_window (DcpDownload       *self,
                                           guint              milliseconds);
/* The free bytes of the filesystem that holds dir; the tests give a fake one. */
typedef gboolean (*DcpFreeBytesFunc) (const char *dir, guint64 *free_bytes, GError **error);
/* Before the first byte, the download checks that the bytes still to come fit (refused with
 * DCP_ERROR_TOO_LARGE otherwise). func NULL: the real filesystem (g_file_query_filesystem_info). */
void         dcp_download_set_free_bytes_func (DcpDownload    *self,
                                          DcpFreeBytesFunc     func);

G_END_DECLS
