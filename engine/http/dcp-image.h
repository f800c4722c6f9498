/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Images in requests (base64, as OpenAI data: URLs and Anthropic base64 sources). The image is
 * decoded with gdk-pixbuf, so that a broken one gets its own clear 400; then, while the vision
 * tower is not implemented, it is refused with DCP_ERROR_NOT_SUPPORTED. So this returns FALSE
 * today, always with an error naming `where`. */
gboolean dcp_image_check (const char *where, const char *media_type, const char *base64, GError **error);

/* Splits "data:image/png;base64,AAAA" into a media type and the base64 text (both new). */
gboolean dcp_image_parse_data_url (const char *where, const char *url, char **media_type, char **base64,
                                   GError **error);

G_END_DECLS
