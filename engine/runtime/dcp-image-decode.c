/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-image-decode"

#include "config.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-image-decode.h"

/* Only the header is read: the loader is told to make a 0x0 image once it knows the size, which
 * every gdk-pixbuf loader takes as "stop here" (as gdk_pixbuf_get_file_info does), so no pixel
 * memory is allocated, whatever size the header claims. The data goes in in small pieces, because
 * a loader still works through the rest of a piece after that (libpng converting rows of a 24000
 * pixel wide image took 250 ms for 4 KiB); and the format is found from the file's signature
 * here rather than by gdk-pixbuf's sniffing, which feeds its first 1 KiB in one piece. */
#define PIECE 64

/* The formats requests may carry: gdk-pixbuf's loader name and the media type. Only these four:
 * no SVG (which may refer to other files), TIFF, BMP or icon loader sees a request's bytes. */
typedef struct {
  const char *loader, *media_type;
} ImageFormat;

static const ImageFormat png = { "png", "image/png" }, jpeg = { "jpeg", "image/jpeg" },
                         gif = { "gif", "image/gif" }, webp = { "webp", "image/webp" };

/* The format from the file's first bytes; NULL for any other. By signature rather than GIO's
 * content types, which need the shared-mime-info database that a headless server may lack. */
static const ImageFormat *
image_format (const guint8 *bytes, gsize length)
{
  static const guint8 png_magic[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

  if (length >= sizeof png_magic && memcmp (bytes, png_magic, sizeof png_magic) == 0)
    return &png;
  if (length >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
    return &jpeg;
  if (length >= 6 && (memcmp (bytes, "GIF87a", 6) == 0 || memcmp (bytes, "GIF89a", 6) == 0))
    return &gif;
  if (length >= 12 && memcmp (bytes, "RIFF", 4) == 0 && memcmp (bytes + 8, "WEBP", 4) == 0)
    return &webp;
  return NULL;
}

const char *
dcp_image_media_type (const guint8 *bytes, gsize length)
{
  const ImageFormat *f = image_format (bytes, length);

  return f != NULL ? f->media_type : NULL;
}

/* A loader for the bytes' format; NULL with error set when it is none of the four, or when
 * gdk-pixbuf has no loader for it here (WebP comes with a separate package). */
static GdkPixbufLoader *
image_loader_new (const char *where, const guint8 *bytes, gsize length, GError **error)
{
  const ImageFormat *f = image_format (bytes, length);
  GdkPixbufLoader *loader;

  if (f == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image is not a PNG, JPEG, GIF or WebP file", where);
      return NULL;
    }
  loader = gdk_pixbuf_loader_new_with_type (f->loader, NULL);
  if (loader == NULL)
    g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                 "%s: this server's gdk-pixbuf has no %s loader%s", where, f->loader,
                 f == &webp ? " (Debian: webp-pixbuf-loader)" : "");
  return loader;
}

static void
on_size_prepared (GdkPixbufLoader *loader, gint width, gint height, gpointer user_data)
{
  gint *size = user_data;

  size[0] = width;
  size[1] = height;
  gdk_pixbuf_loader_set_size (loader, 0, 0);
}

gboolean
dcp_image_probe (const char *where, const guint8 *bytes, gsize length, guint *width, guint *height,
                 GError **error)
{
  g_autoptr(GdkPixbufLoader) loader = NULL;
  gint size[2] = { 0, 0 };

  g_return_val_if_fail (where != NULL && bytes != NULL, FALSE);

  loader = image_loader_new (where, bytes, length, error);
  if (loader == NULL)
    return FALSE;
  g_signal_connect (loader, "size-prepared", G_CALLBACK (on_size_prepared), size);
  for (gsize at = 0; at < length && size[0] == 0; at += PIECE)
    if (!gdk_pixbuf_loader_write (loader, bytes + at, MIN (PIECE, length - at), NULL))
      break;
  gdk_pixbuf_loader_close (loader, NULL);
  if (size[0] <= 0 || size[1] <= 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image could not be decoded (not a known image format, or damaged)",
                   where);
      return FALSE;
    }
  if (size[0] > DCP_IMAGE_MAX_SIDE || size[1] > DCP_IMAGE_MAX_SIDE ||
      (gint64) size[0] * size[1] > DCP_IMAGE_MAX_PIXELS)
    {
      g_set_error (
          error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
          "%s: the image is %dx%d pixels; at most %d pixels a side and %d pixels in all are accepted",
          where, size[0], size[1], DCP_IMAGE_MAX_SIDE, DCP_IMAGE_MAX_PIXELS);
      return FALSE;
    }
  *width = (guint) size[0];
  *height = (guint) size[1];
  return TRUE;
}

/* The rows a loader has filled: a truncated file closes without an error in some loaders,
 * its pixbuf partly unwritten. */
static void
on_area_updated (GdkPixbufLoader *loader, gint x, gint y, gint width, gint height,
                 gpointer user_data)
{
  gint *rows = user_data;

  *rows = MAX (*rows, y + height);
}

guint8 *
dcp_image_decode_rgb (const char *where, const guint8 *bytes, gsize length, guint *width,
                      guint *height, GError **error)
{
  gint rows = 0;
  g_autoptr(GdkPixbufLoader) loader = NULL;
  g_autoptr(GError) local = NULL;
  GdkPixbuf *pixbuf;
  guint8 *rgb;
  const guint8 *pixels;
  int channels, stride;

  g_return_val_if_fail (where != NULL && bytes != NULL, NULL);

  /* The header first: no pixel memory for a size refused. */
  if (!dcp_image_probe (where, bytes, length, width, height, error))
    return NULL;
  loader = image_loader_new (where, bytes, length, error);
  if (loader == NULL)
    return NULL;
  g_signal_connect (loader, "area-updated", G_CALLBACK (on_area_updated), &rows);
  if (!gdk_pixbuf_loader_write (loader, bytes, length, &local) ||
      !gdk_pixbuf_loader_close (loader, &local) ||
      (pixbuf = gdk_pixbuf_loader_get_pixbuf (loader)) == NULL ||
      gdk_pixbuf_get_bits_per_sample (pixbuf) != 8 || gdk_pixbuf_get_n_channels (pixbuf) < 3 ||
      rows < gdk_pixbuf_get_height (pixbuf))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image could not be decoded%s%s", where,
                   local ? ": " : " (damaged or cut short)", local ? local->message : "");
      return NULL;
    }
  *width = gdk_pixbuf_get_width (pixbuf);
  *height = gdk_pixbuf_get_height (pixbuf);
  channels = gdk_pixbuf_get_n_channels (pixbuf);
  stride = gdk_pixbuf_get_rowstride (pixbuf);
  pixels = gdk_pixbuf_read_pixels (pixbuf);
  rgb = g_new (guint8, (gsize) *width * *height * 3);
  for (guint y = 0; y < *height; y++)
    for (guint x = 0; x < *width; x++)
      memcpy (rgb + ((gsize) y * *width + x) * 3,
              pixels + (gsize) y * stride + (gsize) x * channels, 3);
  return rgb;
}
