/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Images as requests carry them (the bytes of a PNG, JPEG, GIF or WebP file), through
 * gdk-pixbuf. An image larger than DCP_IMAGE_MAX_SIDE a side or DCP_IMAGE_MAX_PIXELS in all is
 * refused from its header, before any pixel memory is taken; a request holds at most
 * DCP_IMAGE_MAX_PER_REQUEST images. Errors are INVALID_ARGUMENT and name `where`. */
#define DCP_IMAGE_MAX_SIDE 16384
#define DCP_IMAGE_MAX_PIXELS (32 * 1024 * 1024)
#define DCP_IMAGE_MAX_PER_REQUEST 32

/* "image/png", "image/jpeg", "image/gif" or "image/webp" from the bytes' signature; NULL for
 * any other format (refused by the two below). */
const char *dcp_image_media_type (const guint8 *bytes, gsize length);
/* The size in the image's header, checked against the limits. */
gboolean dcp_image_probe (const char *where, const guint8 *bytes, gsize length, guint *width,
                          guint *height, GError **error);
/* Decodes to packed 8-bit RGB, width x height x 3 bytes (the first frame of an animation; an
 * alpha channel is dropped, as Pillow's convert ("RGB") drops it). */
guint8 *dcp_image_decode_rgb (const char *where, const guint8 *bytes, gsize length, guint *width,
                              guint *height, GError **error);

G_END_DECLS
