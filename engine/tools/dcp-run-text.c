/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "decapybara-run"

#include "config.h"

#include <stdio.h>

#include "dcp-batch-executor.h"
#include "dcp-chat-template.h"
#include "dcp-model-executor.h"
#include "dcp-run-text.h"
#include "dcp-tokenizer.h"

static DcpTokenizer *
open_tokenizer (DcpModelSource *model, GError **error)
{
  JsonNode *json = dcp_model_source_get_tokenizer (model);

  if (json == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s: the model has no tokenizer",
                   dcp_model_source_get_path (model));
      return NULL;
    }
  return dcp_tokenizer_new_from_json (json, error);
}

gboolean
dcp_run_encode (DcpModelSource *model, const char *text, GError **error)
{
  g_autoptr(DcpTokenizer) tokenizer = open_tokenizer (model, error);
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));

  if (tokenizer == NULL)
    return FALSE;
  dcp_tokenizer_encode (tokenizer, text, -1, DCP_TOKENIZER_ENCODE_DEFAULT, ids);
  for (guint i = 0; i < ids->len; i++)
    g_print ("%s%u", i ? "," : "", g_array_index (ids, guint32, i));
  g_print ("\n");
  return TRUE;
}

gboolean
dcp_run_decode (DcpModelSource *model, const char *ids, GError **error)
{
  g_autoptr(DcpTokenizer) tokenizer = open_tokenizer (model, error);
  g_auto(GStrv) parts = g_strsplit (ids, ",", -1);
  g_autoptr(GArray) values = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autofree char *text = NULL;
  gsize len;

  if (tokenizer == NULL)
    return FALSE;
  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 id;

      if (!g_ascii_string_to_unsigned (g_strstrip (parts[i]), 10, 0, G_MAXUINT32, &id, NULL))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "--decode: “%s” is not a token id", parts[i]);
          return FALSE;
        }
      g_array_append_vals (values, &(guint32) { (guint32) id }, 1);
    }
  text = dcp_tokenizer_decode (tokenizer, (const guint32 *) values->data, values->len,
                               DCP_TOKENIZER_DECODE_DEFAULT, &len);
  fwrite (text, 1, len, stdout);
  g_print ("\n");
  return TRUE;
}

DcpRequest *
dcp_run_load_chat (const char *path, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_CHAT);
  JsonObject *root;
  JsonNode *node;

  if (!json_parser_load_from_file (parser, path, error))
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: not a JSON object", path);
      return NULL;
    }
  root = json_node_get_object (json_parser_get_root (parser));
  node = json_object_get_member (root, "messages");
  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: field “messages” must be an array", path);
      return NULL;
    }
  request->messages = json_node_copy (node);
  node = json_object_get_member (root, "tools");
  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node))
    request->tools = json_node_copy (node);
  else if (node != NULL && !JSON_NODE_HOLDS_NULL (node))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: field “tools” must be an array", path);
      return NULL;
    }
  node = json_object_get_member (root, "kwargs");
  if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
    {
      json_object_unref (request->template_kwargs);
      request->template_kwargs = json_object_ref (json_node_get_object (node));
    }
  else if (node != NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: field “kwargs” must be an object", path);
      return NULL;
    }
  return g_steal_pointer (&request);
}

gboolean
dcp_run_render (DcpModelSource *model, const char *path, GError **error)
{
  g_autoptr(DcpRequest) request = dcp_run_load_chat (path, error);
  g_autoptr(DcpChatTemplate) template = NULL;
  g_autofree char *text = NULL;
  const char *source = dcp_model_source_get_chat_template (model);

  if (request == NULL)
    return FALSE;
  if (source == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s: the model has no chat template",
                   dcp_model_source_get_path (model));
      return FALSE;
    }
  template = dcp_chat_template_new (source, error);
  if (template == NULL)
    return FALSE;
  text = dcp_chat_template_render (template, request->messages, request->tools, TRUE,
                                   request->template_kwargs, error);
  if (text == NULL)
    return FALSE;
  g_print ("%s", text);
  return TRUE;
}

/* Prints the events as they come (on the executor's text thread) and says when the last came. */
typedef struct {
  DcpEventSink sink;
  gboolean in_reasoning;
  DcpUsage usage;
  DcpFinishReason reason;
  GError *error;
  GMutex lock;
  GCond cond;
  gboolean done;
} Printer;

static void
print_event (DcpEventSink *sink, DcpEvent *event)
{
  Printer *p = (Printer *) sink;

  if (event->kind == DCP_EVENT_REASONING)
    {
      g_printerr ("%s%s", p->in_reasoning ? "" : "<think>", event->text);
      p->in_reasoning = TRUE;
    }
  else if (event->kind != DCP_EVENT_PROGRESS && p->in_reasoning)
    {
      g_printerr ("</think>\n");
      p->in_reasoning = FALSE;
    }
  if (event->kind == DCP_EVENT_CONTENT)
    g_print ("%s", event->text);
  else if (event->kind == DCP_EVENT_TOOL_CALL)
    g_print ("\n{\"tool_call\": {\"id\": \"%s\", \"name\": \"%s\", \"arguments\": %s}}\n",
             event->tool_id, event->tool_name, event->tool_arguments);
  else if (event->kind == DCP_EVENT_FINISH)
    {
      p->usage = event->usage;
      p->reason = event->reason;
    }
  else if (event->kind == DCP_EVENT_ERROR)
    p->error = g_steal_pointer (&event->error);
  fflush (stdout);
  if (dcp_event_ends_request (event, 1))
    {
      g_mutex_lock (&p->lock);
      p->done = TRUE;
      g_cond_signal (&p->cond);
      g_mutex_unlock (&p->lock);
    }
  dcp_event_free (event);
}

gboolean
dcp_run_generate (DcpModelSource *model, DcpBackend *backend, DcpRequest *request,
                  gboolean timing, GError **error)
{
  g_autoptr(DcpExecutor) executor = NULL;
  DcpModelExecutor *model_executor;
  DcpModelExecutorOptions options;
  DcpSchedulerConfig config;
  Printer printer = { { print_event }, FALSE, { 0 }, DCP_FINISH_STOP, NULL };
  guint context = dcp_backend_get_config (backend)->max_position_embeddings;

  dcp_model_executor_options_init (&options);
  model_executor = dcp_model_executor_new (model, backend, &options, error);
  if (model_executor == NULL)
    return FALSE;
  /* One conversation through the scheduler, a pool for the model's context (at most 256 pages). */
  dcp_scheduler_config_init (&config);
  config.kv_pages = CLAMP ((context + DCP_PAGE_TOKENS - 1) / DCP_PAGE_TOKENS, 1, 256);
  config.gdn_blocks = dcp_plan_gdn_blocks (1);
  executor = dcp_batch_executor_new (model_executor, &config, error);
  if (executor == NULL)
    return FALSE;
  if (request->id == NULL)
    request->id = g_strdup ("run");
  if (request->cancellable == NULL)
    request->cancellable = g_cancellable_new ();
  g_mutex_init (&printer.lock);
  g_cond_init (&printer.cond);
  dcp_executor_submit (executor, request, &printer.sink);
  g_mutex_lock (&printer.lock);
  while (!printer.done)
    g_cond_wait (&printer.cond, &printer.lock);
  g_mutex_unlock (&printer.lock);
  g_mutex_clear (&printer.lock);
  g_cond_clear (&printer.cond);
  g_print ("\n");
  if (printer.error != NULL)
    {
      g_propagate_error (error, printer.error);
      return FALSE;
    }
  if (timing)
    g_printerr ("finish: %s; prompt: %" G_GINT64_FORMAT " tokens in %.3f s; output: %" G_GINT64_FORMAT
                " tokens (%" G_GINT64_FORMAT " reasoning) in %.3f s (%.1f tokens/s)\n",
                dcp_finish_reason_to_string (printer.reason), printer.usage.prompt_tokens,
                printer.usage.prompt_ms / 1000, printer.usage.completion_tokens,
                printer.usage.reasoning_tokens, printer.usage.generation_ms / 1000,
                printer.usage.completion_tokens / MAX (printer.usage.generation_ms / 1000, 1e-9));
  return TRUE;
}
