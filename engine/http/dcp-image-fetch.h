/* SPDX-License-Identifier: MIT */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* DcpImageFetcher: images given as http(s) URLs (--allow-image-urls on), fetched with libsoup on
 * the main loop before the request is submitted. A request's parts {"type": "image", "url": ...,
 * "where": ...} (dcp_image_url_part) become {"type": "image", "media_type": ..., "data": base64}.
 * One request's images are fetched one after another within one time limit and one byte limit
 * (all of them together), the bytes counted as they arrive; redirects are followed a few times,
 * to http(s) only. Errors are INVALID_ARGUMENT and name the part and the URL: not found (any
 * status but 200), too large, timeout, not an image gdk-pixbuf reads. */
typedef struct _DcpImageFetcher DcpImageFetcher;

#define DCP_IMAGE_FETCH_MAX_REDIRECTS 5

DcpImageFetcher *dcp_image_fetcher_new (gsize max_bytes, guint timeout_seconds);
void dcp_image_fetcher_free (DcpImageFetcher *self);

/* Whether messages (the request's neutral array, or NULL) hold an image URL to fetch. */
gboolean dcp_image_fetch_needed (JsonNode *messages);
/* Fetches every image URL of messages and puts the images in their parts; the array is changed
 * in place, so it must not be used elsewhere until the callback runs. */
void dcp_image_fetch_async (DcpImageFetcher *self, JsonNode *messages, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data);
gboolean dcp_image_fetch_finish (GAsyncResult *result, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpImageFetcher, dcp_image_fetcher_free)

G_END_DECLS
