/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "render-chat"

#include "config.h"

#include <json-glib/json-glib.h>
#include <stdio.h>

#include "dcp-chat-template.h"
#include "dcp-error.h"

/* render-chat TEMPLATE CASE.json...: renders each conversation case with a chat template and
 * prints a JSON array, one object per case: {"case": path, "output": text} or
 * {"case": path, "error": message, "code": DcpError}. TEMPLATE is a .jinja file, or a
 * tokenizer_config.json whose "chat_template" string is used. The conformance test
 * (chat_template_oracle.py) compares this with jinja2. */

static char *
load_template (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(JsonParser) parser = NULL;
  JsonObject *root;

  if (!g_file_get_contents (path, &text, NULL, error))
    return NULL;
  if (!g_str_has_suffix (path, ".json"))
    return g_steal_pointer (&text);
  parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, text, -1, error))
    return NULL;
  root = JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))
         ? json_node_get_object (json_parser_get_root (parser)) : NULL;
  if (root == NULL || !json_object_has_member (root, "chat_template"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: no chat_template", path);
      return NULL;
    }
  return g_strdup (json_object_get_string_member (root, "chat_template"));
}

static void
render_case (DcpChatTemplate *tmpl, const char *path, JsonBuilder *out)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  JsonObject *c = NULL;

  json_builder_begin_object (out);
  json_builder_set_member_name (out, "case");
  json_builder_add_string_value (out, path);
  if (json_parser_load_from_file (parser, path, &error))
    {
      c = JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))
          ? json_node_get_object (json_parser_get_root (parser)) : NULL;
      if (c == NULL || !json_object_has_member (c, "messages"))
        g_set_error (&error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "case has no messages");
    }
  if (error == NULL)
    {
      JsonNode *tools = json_object_get_member (c, "tools");
      JsonNode *kwargs = json_object_get_member (c, "kwargs");
      gboolean add = json_object_get_boolean_member_with_default (c, "add_generation_prompt", FALSE);
      text = dcp_chat_template_render (tmpl, json_object_get_member (c, "messages"), tools, add,
                                       kwargs && JSON_NODE_HOLDS_OBJECT (kwargs)
                                       ? json_node_get_object (kwargs) : NULL, &error);
    }
  if (text)
    {
      json_builder_set_member_name (out, "output");
      json_builder_add_string_value (out, text);
    }
  else
    {
      json_builder_set_member_name (out, "error");
      json_builder_add_string_value (out, error->message);
      json_builder_set_member_name (out, "code");
      json_builder_add_int_value (out, error->code);
    }
  json_builder_end_object (out);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *source = NULL;
  g_autoptr(DcpChatTemplate) tmpl = NULL;
  g_autoptr(JsonBuilder) out = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *json = NULL;

  if (argc < 3)
    {
      fprintf (stderr, "usage: %s TEMPLATE CASE.json...\n", argv[0]);
      return 2;
    }
  if (!(source = load_template (argv[1], &error)) ||
      !(tmpl = dcp_chat_template_new (source, &error)))
    {
      fprintf (stderr, "%s: %s\n", argv[1], error->message);
      return 1;
    }
  dcp_chat_template_set_eos_token (tmpl, "<|im_end|>");
  json_builder_begin_array (out);
  for (int i = 2; i < argc; i++)
    render_case (tmpl, argv[i], out);
  json_builder_end_array (out);
  root = json_builder_get_root (out);
  json_generator_set_root (gen, root);
  json = json_generator_to_data (gen, NULL);
  fputs (json, stdout);
  fputc ('\n', stdout);
  return 0;
}
