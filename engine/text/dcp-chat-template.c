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
  gboolean takes_strings;   /* join text parts before rendering (see probe_content_shape) */
};

static char *render (DcpChatTemplate *tmpl, JsonNode *messages, JsonNode *tools,
                     gboolean add_generation_prompt, JsonObject *kwargs, GError **error);

/* Clients send a message's content as a string or as a list of parts ({"type": "text", "text"}),
 * and the OpenAI and Anthropic APIs treat both alike; templates do not. Qwen3.5 and later walk a
 * list of parts, while Qwen3's and Qwen3-Coder's templates concatenate content as a string and
 * fail on (or print the repr of) a list. Which shape a template takes is learnt once, by
 * rendering one user turn both ways: a template that renders the single text part exactly as it
 * renders the string takes lists; one that renders only the string takes strings, and every
 * all-text list is then joined with newlines before it is rendered. */
#define PROBE_TEXT "Decapybara content probe 7f3a"

static JsonNode *
probe_messages (gboolean as_parts)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "role");
  json_builder_add_string_value (b, "user");
  json_builder_set_member_name (b, "content");
  if (as_parts)
    {
      json_builder_begin_array (b);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "type");
      json_builder_add_string_value (b, "text");
      json_builder_set_member_name (b, "text");
      json_builder_add_string_value (b, PROBE_TEXT);
      json_builder_end_object (b);
      json_builder_end_array (b);
    }
  else
    json_builder_add_string_value (b, PROBE_TEXT);
  json_builder_end_object (b);
  json_builder_end_array (b);
  return json_builder_get_root (b);
}

static gboolean
probe_content_shape (DcpChatTemplate *tmpl)
{
  g_autoptr(JsonNode) as_string = probe_messages (FALSE);
  g_autoptr(JsonNode) as_parts = probe_messages (TRUE);
  g_autofree char *string_out = render (tmpl, as_string, NULL, TRUE, NULL, NULL);
  g_autofree char *parts_out = NULL;

  if (string_out == NULL || strstr (string_out, PROBE_TEXT) == NULL)
    return FALSE;
  parts_out = render (tmpl, as_parts, NULL, TRUE, NULL, NULL);
  return g_strcmp0 (parts_out, string_out) != 0;
}

/* The text of a list made only of text parts, joined with newlines; NULL for anything else. */
static char *
joined_text_parts (JsonNode *content)
{
  g_autoptr(GString) text = g_string_new (NULL);
  JsonArray *parts;

  if (content == NULL || !JSON_NODE_HOLDS_ARRAY (content))
    return NULL;
  parts = json_node_get_array (content);
  for (guint i = 0; i < json_array_get_length (parts); i++)
    {
      JsonNode *part = json_array_get_element (parts, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (part) ? json_node_get_object (part) : NULL;
      JsonNode *type = o ? json_object_get_member (o, "type") : NULL;
      JsonNode *value = o ? json_object_get_member (o, "text") : NULL;

      if (type == NULL || json_node_get_value_type (type) != G_TYPE_STRING
          || !g_str_equal (json_node_get_string (type), "text")
          || value == NULL || json_node_get_value_type (value) != G_TYPE_STRING)
        return NULL;
      if (i > 0)
        g_string_append_c (text, '\n');
      g_string_append (text, json_node_get_string (value));
    }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

/* messages with every all-text content list joined into a string (a new array), or NULL when no
 * message has one. Lists with other parts (images) are left for the template to refuse. */
static JsonNode *
join_text_parts (JsonNode *messages)
{
  JsonArray *in = json_node_get_array (messages);
  g_autoptr(JsonArray) out = NULL;

  for (guint i = 0; i < json_array_get_length (in); i++)
    {
      JsonNode *m = json_array_get_element (in, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (m) ? json_node_get_object (m) : NULL;
      g_autofree char *text = o ? joined_text_parts (json_object_get_member (o, "content")) : NULL;

      if (text != NULL && out == NULL)
        {
          out = json_array_sized_new (json_array_get_length (in));
          for (guint j = 0; j < i; j++)
            json_array_add_element (out, json_node_copy (json_array_get_element (in, j)));
        }
      if (out == NULL)
        continue;
      if (text == NULL)
        json_array_add_element (out, json_node_copy (m));
      else
        {
          JsonObject *copy = json_object_new ();
          g_autoptr(GList) names = json_object_get_members (o);

          /* The same members in the same order, as the template may print the message. */
          for (GList *l = names; l != NULL; l = l->next)
            {
              if (g_str_equal (l->data, "content"))
                json_object_set_string_member (copy, "content", text);
              else
                json_object_set_member (copy, l->data, json_node_copy (json_object_get_member (o, l->data)));
            }
          json_array_add_object_element (out, copy);
        }
    }
  return out ? json_node_init_array (json_node_alloc (), out) : NULL;
}

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
  tmpl->takes_strings = probe_content_shape (tmpl);
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
  g_autoptr(JsonNode) joined = NULL;

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
  if (tmpl->takes_strings)
    joined = join_text_parts (messages);
  return render (tmpl, joined ? joined : messages, tools, add_generation_prompt, kwargs, error);
}

static char *
render (DcpChatTemplate *tmpl, JsonNode *messages, JsonNode *tools, gboolean add_generation_prompt,
        JsonObject *kwargs, GError **error)
{
  g_autoptr(DcpJinjaValue) globals = NULL;
  g_autoptr(JsonNode) flag = NULL;

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
