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

gboolean
dcp_image_check (const char *where, const char *media_type, const char *base64, GError **error)
{
  g_autoptr(GdkPixbufLoader) loader = NULL;
  g_autoptr(GError) local = NULL;
  g_autofree guchar *bytes = NULL;
  gsize length = 0;

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
  if (!gdk_pixbuf_loader_write (loader, bytes, length, &local) || !gdk_pixbuf_loader_close (loader, &local)
      || gdk_pixbuf_loader_get_pixbuf (loader) == NULL)
    {
      gdk_pixbuf_loader_close (loader, NULL);
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: the image could not be decoded: %s", where,
                   local ? local->message : "unknown format");
      return FALSE;
    }
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
               "%s: images are not supported yet (the vision tower is not implemented); the %dx%d %s "
               "image was read but cannot be used", where,
               gdk_pixbuf_get_width (gdk_pixbuf_loader_get_pixbuf (loader)),
               gdk_pixbuf_get_height (gdk_pixbuf_loader_get_pixbuf (loader)), media_type);
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
