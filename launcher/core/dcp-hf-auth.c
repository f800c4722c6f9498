/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-hf-auth"

#include "config.h"

#include "dcp-hf-auth.h"

typedef struct {
  char *header;   /* "Bearer TOKEN" */
  char *host;     /* the endpoint's host, lower case */
} Auth;

static void
auth_free (gpointer data)
{
  Auth *auth = data;

  g_free (auth->header);
  g_free (auth->host);
  g_free (auth);
}

/* Before each send, the first and every one after a redirect. */
static void
apply (SoupMessage *msg, Auth *auth)
{
  GUri *uri = soup_message_get_uri (msg);
  SoupMessageHeaders *headers = soup_message_get_request_headers (msg);

  if (g_uri_get_host (uri) != NULL && g_ascii_strcasecmp (g_uri_get_host (uri), auth->host) == 0)
    soup_message_headers_replace (headers, "Authorization", auth->header);
  else
    soup_message_headers_remove (headers, "Authorization");
}

void
dcp_hf_authorize (SoupMessage *msg, const char *endpoint, const char *token)
{
  g_autoptr(GUri) uri = NULL;
  Auth *auth;

  g_return_if_fail (SOUP_IS_MESSAGE (msg));
  if (token == NULL || *token == '\0' || endpoint == NULL)
    return;
  uri = g_uri_parse (endpoint, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return;
  auth = g_new0 (Auth, 1);
  auth->header = g_strconcat ("Bearer ", token, NULL);
  auth->host = g_ascii_strdown (g_uri_get_host (uri), -1);
  g_object_set_data_full (G_OBJECT (msg), "dcp-hf-auth", auth, auth_free);
  apply (msg, auth);
  g_signal_connect (msg, "restarted", G_CALLBACK (apply), auth);
}
