/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-image"

#include "config.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <libsoup/soup.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-image-decode.h"
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
  g_autofree guchar *bytes = NULL;
  gsize length = 0;
  guint width, height;

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
  return dcp_image_probe (where, bytes, length, &width, &height, error);
}

JsonObject *
dcp_image_part (const char *media_type, const char *base64)
{
  JsonObject *part = json_object_new ();

  json_object_set_string_member (part, "type", "image");
  json_object_set_string_member (part, "media_type", media_type);
  json_object_set_string_member (part, "data", base64);
  return part;
}

static gboolean
parse_data_url (const char *where, const char *url, char **media_type, char **base64,
                GError **error)
{
  const char *comma = strchr (url, ',');

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

static gboolean
is_http_url (const char *url)
{
  g_autofree char *scheme = g_uri_parse_scheme (url);

  return scheme != NULL &&
         (g_ascii_strcasecmp (scheme, "http") == 0 || g_ascii_strcasecmp (scheme, "https") == 0);
}

JsonObject *
dcp_image_url_part (const char *where, const char *url, gboolean allow_remote, GError **error)
{
  g_autofree char *media_type = NULL, *base64 = NULL;
  JsonObject *part;

  g_return_val_if_fail (where != NULL && url != NULL, NULL);

  if (g_str_has_prefix (url, "data:"))
    {
      if (!parse_data_url (where, url, &media_type, &base64, error) ||
          !dcp_image_check (where, media_type, base64, error))
        return NULL;
      return dcp_image_part (media_type, base64);
    }
  if (!allow_remote)
    {
      g_set_error (
          error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
          "%s: only base64 data: URLs are supported for images; this server does not fetch "
          "remote URLs (its operator can allow http and https ones with --allow-image-urls on)",
          where);
      return NULL;
    }
  if (!is_http_url (url) || !g_uri_is_valid (url, SOUP_HTTP_URI_FLAGS, NULL))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: an image URL must be a base64 data: URL or a valid http or https URL",
                   where);
      return NULL;
    }
  part = json_object_new ();
  json_object_set_string_member (part, "type", "image");
  json_object_set_string_member (part, "url", url);
  json_object_set_string_member (part, "where", where);
  return part;
}

/* gdk-pixbuf's loader list is read on first use (tens of ms): at start, rather than in the middle
 * of serving. */
void
dcp_image_init (void)
{
  g_autoptr(GdkPixbufLoader) loader = gdk_pixbuf_loader_new_with_type ("png", NULL);

  if (loader != NULL)
    gdk_pixbuf_loader_close (loader, NULL);
}
