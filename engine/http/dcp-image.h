/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Images in requests (base64, as OpenAI data: URLs and Anthropic base64 sources). Only the
 * image's header is read (gdk-pixbuf, no pixels decoded): one that is not an image, or larger
 * than DCP_IMAGE_MAX_SIDE a side or DCP_IMAGE_MAX_PIXELS in all, gets its own clear 400; then,
 * while the vision tower is not implemented, it is refused with DCP_ERROR_NOT_SUPPORTED. So this
 * returns FALSE today, always with an error naming `where`. */
#define DCP_IMAGE_MAX_SIDE   16384
#define DCP_IMAGE_MAX_PIXELS (32 * 1024 * 1024)

gboolean dcp_image_check (const char *where, const char *media_type, const char *base64, GError **error);

/* Decodes an image (any format gdk-pixbuf reads: PNG, JPEG, WebP, GIF's first frame, ...) to
 * packed 8-bit RGB, width x height x 3 bytes (an alpha channel is dropped, as Pillow's
 * convert ("RGB") drops it). The size limits above apply before any pixel is decoded; an error
 * names `where`. */
guint8  *dcp_image_decode_rgb (const char   *where,
                               const guint8 *bytes,
                               gsize         length,
                               guint        *width,
                               guint        *height,
                               GError      **error);

/* Reads gdk-pixbuf's and GIO's tables now (main thread, at start). */
void     dcp_image_init  (void);

/* Splits "data:image/png;base64,AAAA" into a media type and the base64 text (both new). */
gboolean dcp_image_parse_data_url (const char *where, const char *url, char **media_type, char **base64,
                                   GError **error);

G_END_DECLS
