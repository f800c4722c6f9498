/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Images in requests (base64, as OpenAI data: URLs and Anthropic base64 sources; http(s) URLs
 * once fetched, dcp-image-fetch.h). Only the image's header is read when a request is
 * (gdk-pixbuf, no pixels decoded): one that is not an image, or larger than the limits of
 * dcp-image-decode.h, gets its own clear 400 naming `where`. The model side decodes it (dcp-image-decode.h) when it renders the prompt. */
gboolean dcp_image_check (const char *where, const char *media_type, const char *base64,
                          GError **error);
/* The request's image part: {"type": "image", "media_type": ..., "data": base64} (dcp-request.h). */
JsonObject *dcp_image_part (const char *media_type, const char *base64);

/* Reads gdk-pixbuf's and GIO's tables now (main thread, at start). */
void     dcp_image_init  (void);

/* The request's part for an image given as a URL, where `where` is the part's place in the
 * request. A base64 data: URL is checked (as dcp_image_check) and becomes an image part. An http
 * or https URL, when allow_remote (--allow-image-urls on), becomes {"type": "image", "url": ...,
 * "where": ...}, which dcp-image-fetch.h fetches before the request is submitted; without
 * allow_remote it is refused, and so is any other scheme. */
JsonObject *dcp_image_url_part (const char *where, const char *url, gboolean allow_remote,
                                GError **error);

G_END_DECLS
