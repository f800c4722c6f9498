/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

/* One file downloaded over HTTP(S) the way model files need it: up to 8 range requests at once,
 * progress as properties, resume after an interruption (the ranges done are kept beside the
 * partial file, DEST.part.json), retries of a dropped connection, and a SHA-256 check before the
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

G_END_DECLS
