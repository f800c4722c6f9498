/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Images in requests (base64, as OpenAI data: URLs and Anthropic base64 sources). Only the
 * image's header is read when a request is (gdk-pixbuf, no pixels decoded): one that is not an
 * image, or larger than the limits of dcp-image-decode.h, gets its own clear 400 naming
 * `where`. The model side decodes it (dcp-image-decode.h) when it renders the prompt. */
gboolean dcp_image_check (const char *where, const char *media_type, const char *base64,
                          GError **error);
/* The request's image part: {"type": "image", "media_type": ..., "data": base64} (dcp-request.h). */
JsonObject *dcp_image_part (const char *media_type, const char *base64);

/* Reads gdk-pixbuf's and GIO's tables now (main thread, at start). */
void     dcp_image_init  (void);

/* Splits "data:image/png;base64,AAAA" into a media type and the base64 text (both new). */
gboolean dcp_image_parse_data_url (const char *where, const char *url, char **media_type, char **base64,
                                   GError **error);

G_END_DECLS
