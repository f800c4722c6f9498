/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-chat-template"

#include "config.h"

#include <string.h>

#include "dcp-chat-template.h"
#include "dcp-error.h"
#include "dcp-jinja.h"

struct _DcpChatTemplate {
  DcpJinjaTemplate *jinja;
  char *bos_token;
  char *eos_token;
};

DcpChatTemplate *
dcp_chat_template_new (const char *source, GError **error)
{
  DcpJinjaTemplate *jinja;
  DcpChatTemplate *tmpl;

  g_return_val_if_fail (source != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!(jinja = dcp_jinja_template_new (source, error)))
    {
      g_prefix_error (error, "chat template: ");
      return NULL;
    }
  tmpl = g_new0 (DcpChatTemplate, 1);
  tmpl->jinja = jinja;
  return tmpl;
}

void
dcp_chat_template_free (DcpChatTemplate *tmpl)
{
  if (tmpl == NULL)
    return;
  dcp_jinja_template_free (tmpl->jinja);
  g_free (tmpl->bos_token);
  g_free (tmpl->eos_token);
  g_free (tmpl);
}

void
dcp_chat_template_set_bos_token (DcpChatTemplate *tmpl, const char *token)
{
  g_return_if_fail (tmpl != NULL);
  g_free (tmpl->bos_token);
  tmpl->bos_token = g_strdup (token);
}

void
dcp_chat_template_set_eos_token (DcpChatTemplate *tmpl, const char *token)
{
  g_return_if_fail (tmpl != NULL);
  g_free (tmpl->eos_token);
  tmpl->eos_token = g_strdup (token);
}

/* Variables transformers passes by name itself; a template argument may not replace them. */
static const char *const reserved[] = {
  "messages", "tools", "documents", "add_generation_prompt", NULL,
};

char *
dcp_chat_template_render (DcpChatTemplate *tmpl, JsonNode *messages, JsonNode *tools,
                          gboolean add_generation_prompt, JsonObject *kwargs, GError **error)
{
  g_autoptr(DcpJinjaValue) globals = NULL;
  g_autoptr(JsonNode) flag = NULL;

  g_return_val_if_fail (tmpl != NULL, NULL);
  g_return_val_if_fail (messages != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!JSON_NODE_HOLDS_ARRAY (messages))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "messages must be an array");
      return NULL;
    }
  if (tools && !JSON_NODE_HOLDS_ARRAY (tools) && !JSON_NODE_HOLDS_NULL (tools))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "tools must be an array");
      return NULL;
    }

  /* The order of apply_chat_template: special tokens, then the caller's template arguments
   * (which may override them), then the named variables. */
  globals = dcp_jinja_dict_new ();
  if (tmpl->bos_token)
    dcp_jinja_dict_set (globals, "bos_token", dcp_jinja_string_new (tmpl->bos_token));
  if (tmpl->eos_token)
    dcp_jinja_dict_set (globals, "eos_token", dcp_jinja_string_new (tmpl->eos_token));
  if (kwargs)
    {
      g_autoptr(GList) names = json_object_get_members (kwargs);
      for (GList *l = names; l; l = l->next)
        {
          if (g_strv_contains (reserved, l->data))
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "chat template argument '%s' may not be given as an extra argument",
                           (const char *) l->data);
              return NULL;
            }
          dcp_jinja_dict_set (globals, l->data,
                              dcp_jinja_value_new_json (json_object_get_member (kwargs, l->data)));
        }
    }
  dcp_jinja_dict_set (globals, "messages", dcp_jinja_value_new_json (messages));
  dcp_jinja_dict_set (globals, "tools", dcp_jinja_value_new_json (tools));
  dcp_jinja_dict_set (globals, "documents", dcp_jinja_value_new_json (NULL));
  flag = json_node_init_boolean (json_node_alloc (), add_generation_prompt);
  dcp_jinja_dict_set (globals, "add_generation_prompt", dcp_jinja_value_new_json (flag));
  return dcp_jinja_template_render (tmpl->jinja, globals, error);
}
