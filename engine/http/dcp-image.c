/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-image"

#include "config.h"

#include <gdk-pixbuf/gdk-pixbuf.h>

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
 * memory is allocated, whatever size the header claims. */
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
  loader = gdk_pixbuf_loader_new ();
  g_signal_connect (loader, "size-prepared", G_CALLBACK (on_size_prepared), size);
  /* In pieces, so that nothing past the header is looked at once the size is known. */
  for (gsize at = 0; at < length && size[0] == 0; at += 4096)
    if (!gdk_pixbuf_loader_write (loader, bytes + at, MIN (4096, length - at), NULL))
      break;
  gdk_pixbuf_loader_close (loader, NULL);
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
