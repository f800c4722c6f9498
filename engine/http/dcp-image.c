/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-image"

#include "config.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-image.h"

static gboolean
is_base64 (const char *text)
{
  for (const char *p = text; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '+' && *p != '/' && *p != '=' && !g_ascii_isspace (*p))
      return FALSE;
  return TRUE;
}

/* Only the header is read: the loader is told to make a 0x0 image once it knows the size, which
 * every gdk-pixbuf loader takes as "stop here" (as gdk_pixbuf_get_file_info does), so no pixel
 * memory is allocated, whatever size the header claims. The data goes in in small pieces, because
 * a loader still works through the rest of a piece after that (libpng converting rows of a 24000
 * pixel wide image took 250 ms for 4 KiB); and the format is found by GIO's content sniffing
 * rather than gdk-pixbuf's, which feeds its first 1 KiB in one piece. */
#define PIECE 64
static void
on_size_prepared (GdkPixbufLoader *loader, gint width, gint height, gpointer user_data)
{
  gint *size = user_data;

  size[0] = width;
  size[1] = height;
  gdk_pixbuf_loader_set_size (loader, 0, 0);
}

gboolean
dcp_image_check (const char *where, const char *media_type, const char *base64, GError **error)
{
  g_autoptr(GdkPixbufLoader) loader = NULL;
  g_autofree guchar *bytes = NULL;
  gsize length = 0;
  gint size[2] = { 0, 0 };
  g_autofree char *type = NULL;

  g_return_val_if_fail (where != NULL && base64 != NULL, FALSE);

  if (media_type == NULL || !g_str_has_prefix (media_type, "image/"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: media type \"%s\" is not an image type",
                   where, media_type ? media_type : "");
      return FALSE;
    }
  if (!is_base64 (base64) || (bytes = g_base64_decode (base64, &length), length == 0))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: the image data is not valid base64", where);
      return FALSE;
    }
  type = g_content_type_guess (NULL, bytes, MIN (length, 4096), NULL);
  loader = gdk_pixbuf_loader_new_with_mime_type (type, NULL);
  if (loader != NULL)
    {
      g_signal_connect (loader, "size-prepared", G_CALLBACK (on_size_prepared), size);
      for (gsize at = 0; at < length && size[0] == 0; at += PIECE)
        if (!gdk_pixbuf_loader_write (loader, bytes + at, MIN (PIECE, length - at), NULL))
          break;
      gdk_pixbuf_loader_close (loader, NULL);
    }
  if (size[0] <= 0 || size[1] <= 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image could not be decoded (not a known image format, or damaged)", where);
      return FALSE;
    }
  if (size[0] > DCP_IMAGE_MAX_SIDE || size[1] > DCP_IMAGE_MAX_SIDE
      || (gint64) size[0] * size[1] > DCP_IMAGE_MAX_PIXELS)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image is %dx%d pixels; at most %d pixels a side and %d pixels in all are accepted",
                   where, size[0], size[1], DCP_IMAGE_MAX_SIDE, DCP_IMAGE_MAX_PIXELS);
      return FALSE;
    }
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
               "%s: images are not supported yet (the vision tower is not implemented); the %dx%d %s "
               "image was read but cannot be used", where, size[0], size[1], media_type);
  return FALSE;
}

gboolean
dcp_image_parse_data_url (const char *where, const char *url, char **media_type, char **base64, GError **error)
{
  const char *comma;

  g_return_val_if_fail (where != NULL && url != NULL, FALSE);

  if (!g_str_has_prefix (url, "data:"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s: only base64 data: URLs are supported for images, not remote URLs", where);
      return FALSE;
    }
  comma = strchr (url, ',');
  if (comma == NULL || comma - url < 12 || strncmp (comma - 7, ";base64", 7) != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: expected a data URL of the form data:image/TYPE;base64,DATA", where);
      return FALSE;
    }
  *media_type = g_strndup (url + 5, (comma - 7) - (url + 5));
  *base64 = g_strdup (comma + 1);
  return TRUE;
}

/* gdk-pixbuf's loader list and GIO's content types are read on first use (tens of ms): at start,
 * rather than in the middle of serving. */
void
dcp_image_init (void)
{
  static const guchar png_magic[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
  g_autofree char *type = g_content_type_guess (NULL, png_magic, sizeof png_magic, NULL);
  g_autoptr(GdkPixbufLoader) loader = gdk_pixbuf_loader_new_with_mime_type (type, NULL);

  if (loader != NULL)
    gdk_pixbuf_loader_close (loader, NULL);
}

guint8 *
dcp_image_decode_rgb (const char *where, const guint8 *bytes, gsize length, guint *width,
                      guint *height, GError **error)
{
  g_autofree char *type = NULL;
  g_autoptr(GdkPixbufLoader) loader = NULL;
  g_autoptr(GError) local = NULL;
  GdkPixbuf *pixbuf;
  gint size[2] = { 0, 0 };
  guint8 *rgb;
  const guint8 *pixels;
  int channels, stride;

  g_return_val_if_fail (where != NULL && bytes != NULL, NULL);

  /* The header first, as dcp_image_check reads it: no pixel memory for a size refused. */
  {
    g_autoptr(GdkPixbufLoader) probe = NULL;

    type = g_content_type_guess (NULL, bytes, MIN (length, 4096), NULL);
    probe = gdk_pixbuf_loader_new_with_mime_type (type, NULL);
    if (probe != NULL)
      {
        g_signal_connect (probe, "size-prepared", G_CALLBACK (on_size_prepared), size);
        for (gsize at = 0; at < length && size[0] == 0; at += PIECE)
          if (!gdk_pixbuf_loader_write (probe, bytes + at, MIN (PIECE, length - at), NULL))
            break;
        gdk_pixbuf_loader_close (probe, NULL);
      }
  }
  if (size[0] <= 0 || size[1] <= 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image could not be decoded (not a known image format, or damaged)", where);
      return NULL;
    }
  if (size[0] > DCP_IMAGE_MAX_SIDE || size[1] > DCP_IMAGE_MAX_SIDE ||
      (gint64) size[0] * size[1] > DCP_IMAGE_MAX_PIXELS)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image is %dx%d pixels; at most %d pixels a side and %d pixels in all are accepted",
                   where, size[0], size[1], DCP_IMAGE_MAX_SIDE, DCP_IMAGE_MAX_PIXELS);
      return NULL;
    }
  loader = gdk_pixbuf_loader_new_with_mime_type (type, &local);
  if (loader == NULL || !gdk_pixbuf_loader_write (loader, bytes, length, &local) ||
      !gdk_pixbuf_loader_close (loader, &local) ||
      (pixbuf = gdk_pixbuf_loader_get_pixbuf (loader)) == NULL ||
      gdk_pixbuf_get_bits_per_sample (pixbuf) != 8 || gdk_pixbuf_get_n_channels (pixbuf) < 3)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: the image could not be decoded%s%s",
                   where, local ? ": " : "", local ? local->message : "");
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
      memcpy (rgb + ((gsize) y * *width + x) * 3, pixels + (gsize) y * stride + (gsize) x * channels, 3);
  return rgb;
}
