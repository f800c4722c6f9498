/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-executor"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-chat-template.h"
#include "dcp-grammar.h"
#include "dcp-loop-guard.h"
#include "dcp-model-executor.h"
#include "dcp-output-parser.h"
#include "dcp-prompt-vision.h"
#include "dcp-sampler.h"
#include "dcp-token-matcher.h"
#include "dcp-token-stream.h"
#include "dcp-tokenizer.h"

struct _DcpModelExecutor {
  DcpModelSource *model;
  DcpBackend *backend;
  DcpTokenizer *tokenizer;
  DcpChatTemplate *template;   /* NULL: the model has none */
  GMutex template_lock;        /* the text thread and count_tokens (main thread) both render */
  char *name;
  gint64 context_length;
  gint loop_guard;             /* a DcpLoopGuardMode; any thread (atomic) */
  GArray *eos;                 /* guint32: ids that end the answer */
  gint64 think_start;          /* <think>, -1 when the vocabulary has none */
  gint64 think_end;
  DcpSamplerParams defaults;   /* the model's generation defaults */
  DcpToolCallForm tool_form;   /* the template's tool-call syntax */
  GMutex trie_lock;
  DcpTokenTrie *trie;          /* the vocabulary for grammars, built at the first one */
  DcpPromptVision *vision;     /* NULL: images are refused */
  gboolean model_has_vision;
};
typedef DcpModelExecutor Executor;

/* One choice being generated. Made on the text thread; then the token-id half (pick_*, the
 * loop guard, forced and banned) belongs to the step thread and the text half to the text
 * thread (dcp-model-executor.h, "Generation"). */
struct _DcpGeneration {
  Executor *exec;
  DcpRequest *request;
  DcpEventSink *sink;
  guint choice;
  GArray *prompt;              /* guint32 */
  DcpPromptImages *images;     /* the prompt's images, or NULL */
  DcpSamplerParams params;
  gint64 max_new;
  guint opening;               /* prompt tokens of the system prompt and tools; 0: none */
  gint64 start_us;
  /* Step thread: what the next pick decides from. */
  DcpLoopGuard *guard;
  GArray *forced;              /* guint32: tokens to emit next instead of sampling */
  GArray *budget_close;        /* guint32: "</think>\n\n", forced when the budget is spent */
  guint32 banned;
  gboolean has_banned;
  gboolean pick_thinking;
  gint64 pick_reasoning;
  gboolean budget_spent;
  DcpTokenMatcher *matcher;    /* a constrained answer's grammar; NULL: free */
  guint32 *allowed;            /* the mask over the model's vocabulary */
  guint32 *stops_only;         /* the mask once the grammar is complete: the stop tokens */
  guint n_words;
  /* Text thread: the answer's text. */
  DcpTokenStream *detok;
  DcpOutputParser *parser;
  GArray *events;              /* DcpOutputEvent */
  GString *text;
  gboolean parse_reasoning;    /* the parser splits <think> ... </think> off as reasoning */
  gboolean in_thinking;
  JsonArray *logprobs;         /* with request->logprobs: entries of the tokens whose text has
                                  not reached a CONTENT event yet */
  DcpUsage usage;
  gint64 first_token_us;
};
typedef DcpGeneration Generation;

void
dcp_model_executor_options_init (DcpModelExecutorOptions *options)
{
  g_return_if_fail (options != NULL);
  memset (options, 0, sizeof *options);
}

static gboolean
is_eos (Executor *self, guint32 token)
{
  for (guint i = 0; i < self->eos->len; i++)
    if (g_array_index (self->eos, guint32, i) == token)
      return TRUE;
  return FALSE;
}

static void
add_eos (Executor *self, gint64 id)
{
  guint32 token = (guint32) id;

  if (id >= 0 && id < G_MAXUINT32 && !is_eos (self, token))
    g_array_append_val (self->eos, token);
}

/* tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}. */
static const char *
special_token (JsonObject *tokenizer_config, const char *name)
{
  JsonNode *node = tokenizer_config ? json_object_get_member (tokenizer_config, name) : NULL;

  if (node == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    return json_node_get_string (node);
  if (JSON_NODE_HOLDS_OBJECT (node) && json_object_has_member (json_node_get_object (node), "content"))
    return json_object_get_string_member (json_node_get_object (node), "content");
  return NULL;
}

/* generation_config.json's eos_token_id (a number or a list), tokenizer_config.json's eos_token
 * and <|im_end|>. */
static void
collect_eos (Executor *self, JsonObject *generation, const char *eos_token)
{
  JsonNode *node = generation ? json_object_get_member (generation, "eos_token_id") : NULL;
  guint32 id;

  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *ids = json_node_get_array (node);

      for (guint i = 0; i < json_array_get_length (ids); i++)
        add_eos (self, json_node_get_int (json_array_get_element (ids, i)));
    }
  else if (node != NULL && JSON_NODE_HOLDS_VALUE (node))
    add_eos (self, json_node_get_int (node));
  if (eos_token != NULL && dcp_tokenizer_token_to_id (self->tokenizer, eos_token, &id))
    add_eos (self, id);
  if (dcp_tokenizer_token_to_id (self->tokenizer, "<|im_end|>", &id))
    add_eos (self, id);
}

static double
member_double (JsonObject *object, const char *name, double fallback)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return fallback;
  if (json_node_get_value_type (node) == G_TYPE_BOOLEAN)
    return json_node_get_boolean (node);
  return json_node_get_double (node);
}

static void
read_defaults (Executor *self, JsonObject *generation)
{
  DcpSamplerParams *p = &self->defaults;

  dcp_sampler_params_init (p);
  p->temperature = member_double (generation, "temperature", 1.0);
  p->top_k = (guint) MAX (member_double (generation, "top_k", 0), 0);
  p->top_p = member_double (generation, "top_p", 1.0);
  p->min_p = member_double (generation, "min_p", 0.0);
  p->repetition_penalty = member_double (generation, "repetition_penalty", 1.0);
  p->presence_penalty = member_double (generation, "presence_penalty", 0.0);
  /* do_sample false in generation_config.json means greedy decoding. */
  if (!member_double (generation, "do_sample", 1))
    p->temperature = 0;
}

/* Choice i of a seeded request draws with seed + i: reproducible, and the choices differ. */
static void
sampler_params (Executor *self, const DcpSampling *s, guint choice, DcpSamplerParams *p)
{
  *p = self->defaults;
  if (s->temperature >= 0)
    p->temperature = s->temperature;
  if (s->top_p >= 0)
    p->top_p = s->top_p;
  if (s->top_k >= 0)
    p->top_k = (guint) s->top_k;
  if (s->min_p >= 0)
    p->min_p = s->min_p;
  if (s->presence_penalty != 0)
    p->presence_penalty = s->presence_penalty;
  if (s->frequency_penalty != 0)
    p->frequency_penalty = s->frequency_penalty;
  if (s->repetition_penalty != 1 && s->repetition_penalty > 0)
    p->repetition_penalty = s->repetition_penalty;
  p->seed = s->has_seed ? s->seed + choice : ((guint64) g_random_int () << 32 | g_random_int ());
}

/* messages: the request's, or a copy with the images' markers in their place. */
static char *
render_prompt (Executor *self, DcpRequest *request, JsonNode *messages, GError **error)
{
  JsonNode *tools = request->tools;
  char *text;

  if (request->kind == DCP_REQUEST_PROMPT)
    return g_strdup (request->prompt ? request->prompt : "");
  if (self->template == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "the model has no chat template: use /v1/completions with a prompt");
      return NULL;
    }
  if (request->tool_choice != NULL && JSON_NODE_HOLDS_VALUE (request->tool_choice) &&
      g_strcmp0 (json_node_get_string (request->tool_choice), "none") == 0)
    tools = NULL;
  g_mutex_lock (&self->template_lock);
  text = dcp_chat_template_render (self->template, messages, tools, TRUE, request->template_kwargs,
                                   error);
  g_mutex_unlock (&self->template_lock);
  return text;
}

/* The prompt's ids; with images, each image's tokens in its place, and with images_out their
 * embeddings and positions (without: only the images' headers are read). */
static GArray *
encode_prompt (Executor *self, DcpRequest *request, char **rendered, DcpPromptImages **images_out,
               GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GPtrArray) images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(JsonNode) marked = NULL;
  g_autoptr(GArray) ids = NULL;

  if (request->kind == DCP_REQUEST_CHAT && request->messages != NULL)
    {
      g_autoptr(GError) local = NULL;

      marked = dcp_prompt_vision_take_images (request->messages, images, &local);
      if (local != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
    }
  if (images->len > 0 && self->vision == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   self->model_has_vision
                       ? "images need the vision tower: start the engine with --vision bf16"
                       : "images need a model with a vision tower, and this one has none");
      return NULL;
    }
  text = render_prompt (self, request, marked != NULL ? marked : request->messages, error);
  if (text == NULL)
    return NULL;
  ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  dcp_tokenizer_encode (self->tokenizer, text, -1, DCP_TOKENIZER_ENCODE_DEFAULT, ids);
  if (images->len > 0 && !dcp_prompt_vision_expand (self->vision, images, ids, images_out, error))
    return NULL;
  if (rendered != NULL)
    *rendered = g_steal_pointer (&text);
  return g_steal_pointer (&ids);
}

GArray *
dcp_model_executor_encode_prompt (DcpModelExecutor *self, DcpRequest *request, char **rendered,
                                  GError **error)
{
  g_return_val_if_fail (self != NULL && request != NULL, NULL);
  return encode_prompt (self, request, rendered, NULL, error);
}

/* Whether the rendered prompt leaves the model inside <think> (the generation prompt of a
 * thinking template ends with "<think>\n"). */
static gboolean
prompt_opens_thinking (const char *text)
{
  const char *start = g_strrstr (text, "<think>");
  const char *end = g_strrstr (text, "</think>");
  const char *turn = g_strrstr (text, "<|im_start|>");

  return start != NULL && (end == NULL || start > end) && (turn == NULL || start > turn);
}

void
dcp_model_executor_get_info (DcpModelExecutor *self, DcpModelInfo *info)
{
  g_return_if_fail (self != NULL && info != NULL);
  info->id = g_strdup (self->name);
  info->context_length = self->context_length;
  info->loaded = TRUE;
}

gboolean
dcp_model_executor_count_tokens (DcpModelExecutor *self, DcpRequest *request, gint64 *n_tokens,
                                 GError **error)
{
  g_autoptr(GArray) ids = NULL;

  g_return_val_if_fail (self != NULL && request != NULL && n_tokens != NULL, FALSE);
  ids = dcp_model_executor_encode_prompt (self, request, NULL, error);
  if (ids == NULL)
    return FALSE;
  *n_tokens = ids->len;
  return TRUE;
}

static void
drop_logprobs (Generation *g)
{
  if (g->logprobs != NULL && json_array_get_length (g->logprobs) > 0)
    {
      json_array_unref (g->logprobs);
      g->logprobs = json_array_new ();
    }
}

/* Turns the parser's events into executor events. */
static void
emit_output (Generation *g)
{
  for (guint i = 0; i < g->events->len; i++)
    {
      DcpOutputEvent *out = &g_array_index (g->events, DcpOutputEvent, i);
      DcpEvent *event;

      if (out->kind == DCP_OUTPUT_EVENT_TOOL_CALL)
        {
          /* Tokens that became a tool call get no logprobs (reasoning tokens were never
           * given any: generation_accept). */
          drop_logprobs (g);
          event = dcp_event_new (DCP_EVENT_TOOL_CALL);
          event->tool_id = g_strdup (out->id);
          event->tool_name = g_strdup (out->name);
          event->tool_arguments = g_strdup (out->arguments);
        }
      else if (out->text == NULL || out->text[0] == '\0')
        continue;
      else
        {
          event = dcp_event_new (out->kind == DCP_OUTPUT_EVENT_REASONING ? DCP_EVENT_REASONING
                                                                          : DCP_EVENT_CONTENT);
          event->text = g_strdup (out->text);
          if (g->logprobs != NULL && event->kind == DCP_EVENT_CONTENT &&
              json_array_get_length (g->logprobs) > 0)
            {
              event->logprobs = json_node_new (JSON_NODE_ARRAY);
              json_node_take_array (event->logprobs, g_steal_pointer (&g->logprobs));
              g->logprobs = json_array_new ();
            }
        }
      dcp_event_sink_emit (g->sink, event);
    }
  g_array_set_size (g->events, 0);
}

static void
generation_clear (Generation *g)
{
  g_clear_pointer (&g->prompt, g_array_unref);
  g_clear_pointer (&g->images, dcp_prompt_images_unref);
  g_clear_pointer (&g->guard, dcp_loop_guard_free);
  g_clear_pointer (&g->detok, dcp_token_stream_free);
  g_clear_pointer (&g->parser, dcp_output_parser_free);
  g_clear_pointer (&g->events, g_array_unref);
  g_clear_pointer (&g->forced, g_array_unref);
  g_clear_pointer (&g->budget_close, g_array_unref);
  g_clear_pointer (&g->matcher, dcp_token_matcher_free);
  g_clear_pointer (&g->allowed, g_free);
  g_clear_pointer (&g->stops_only, g_free);
  g_clear_pointer (&g->logprobs, json_array_unref);
  if (g->text != NULL)
    g_string_free (g->text, TRUE);
}

/* The tokens of the conversation's opening (its system message and tools), which agents of
 * one team share: rendered alone, and kept only when they are a prefix of the prompt. 0 when
 * there is none or the template renders it differently alone. */
static guint
opening_length (Executor *self, DcpRequest *request, GArray *prompt)
{
  JsonArray *messages;
  JsonNode *first;
  gboolean system;
  JsonNode *tools = request->tools != NULL && JSON_NODE_HOLDS_ARRAY (request->tools) ? request->tools : NULL;
  g_autoptr(JsonArray) head = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(GArray) ids = NULL;
  g_autofree char *text = NULL;

  if (request->kind != DCP_REQUEST_CHAT || self->template == NULL || request->messages == NULL ||
      !JSON_NODE_HOLDS_ARRAY (request->messages))
    return 0;
  messages = json_node_get_array (request->messages);
  first = json_array_get_length (messages) > 0 ? json_array_get_element (messages, 0) : NULL;
  system = first != NULL && JSON_NODE_HOLDS_OBJECT (first) &&
    g_strcmp0 (json_object_get_string_member_with_default (json_node_get_object (first), "role", ""),
               "system") == 0;
  if ((!system && tools == NULL) ||
      (request->tool_choice != NULL && JSON_NODE_HOLDS_VALUE (request->tool_choice) &&
       g_strcmp0 (json_node_get_string (request->tool_choice), "none") == 0))
    return 0;
  head = json_array_new ();
  node = json_node_new (JSON_NODE_ARRAY);
  if (system)
    json_array_add_element (head, json_node_copy (first));
  json_node_set_array (node, head);
  g_mutex_lock (&self->template_lock);
  text = dcp_chat_template_render (self->template, node, tools, FALSE, request->template_kwargs, NULL);
  g_mutex_unlock (&self->template_lock);
  if (text == NULL)
    return 0;
  ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  dcp_tokenizer_encode (self->tokenizer, text, -1, DCP_TOKENIZER_ENCODE_DEFAULT, ids);
  if (ids->len == 0 || ids->len >= prompt->len ||
      memcmp (ids->data, prompt->data, (gsize) ids->len * sizeof (guint32)) != 0)
    return 0;
  return ids->len;
}

/* The vocabulary trie, built once per tokenizer at the first constrained request. */
static DcpTokenTrie *
get_trie (Executor *self)
{
  DcpTokenTrie *trie;

  g_mutex_lock (&self->trie_lock);
  if (self->trie == NULL)
    self->trie = dcp_token_trie_new (self->tokenizer);
  trie = dcp_token_trie_ref (self->trie);
  g_mutex_unlock (&self->trie_lock);
  return trie;
}

/* The grammar a request's answer must follow: a forced tool call (tool_choice "required" or a
 * named function), else its output format; NULL with no error when the answer is free. */
static DcpGrammar *
request_grammar (Executor *self, DcpRequest *request, DcpGrammarFlags flags, GError **error)
{
  JsonNode *choice = request->tool_choice;

  if (request->kind != DCP_REQUEST_CHAT)
    return NULL;
  if (choice != NULL && request->tools != NULL && JSON_NODE_HOLDS_ARRAY (request->tools))
    {
      JsonArray *tools = json_node_get_array (request->tools);

      if (JSON_NODE_HOLDS_VALUE (choice) && g_strcmp0 (json_node_get_string (choice), "required") == 0)
        return dcp_grammar_new_tool_call (tools, NULL, self->tool_form, flags, error);
      if (JSON_NODE_HOLDS_OBJECT (choice))
        {
          JsonObject *function = json_object_get_object_member (json_node_get_object (choice), "function");
          const char *name = function != NULL ? json_object_get_string_member_with_default (function, "name", NULL)
                                              : NULL;

          if (name != NULL)
            return dcp_grammar_new_tool_call (tools, name, self->tool_form, flags, error);
        }
    }
  if (request->output_format == DCP_OUTPUT_FORMAT_JSON_OBJECT)
    return dcp_grammar_new_json_object (flags);
  if (request->output_format == DCP_OUTPUT_FORMAT_JSON_SCHEMA && request->output_schema != NULL)
    return dcp_grammar_new_json_schema (request->output_schema, flags, error);
  return NULL;
}

/* A constrained answer's matcher and masks (the trie is built at the first one). */
static gboolean
constrain (Generation *g, GError **error)
{
  Executor *self = g->exec;
  g_autoptr(GError) local = NULL;
  g_autoptr(DcpGrammar) grammar = NULL;
  g_autoptr(DcpTokenTrie) trie = NULL;
  guint vocab = dcp_backend_get_config (self->backend)->vocab_size;

  grammar = request_grammar (self, g->request, g->in_thinking ? DCP_GRAMMAR_THINKING_FIRST : DCP_GRAMMAR_DEFAULT,
                             &local);
  if (grammar == NULL)
    {
      if (local == NULL)
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  trie = get_trie (self);
  g->matcher = dcp_token_matcher_new (grammar, trie, (const guint32 *) self->eos->data, self->eos->len);
  /* The document ends, and the stop token comes, within max_tokens (finish_reason "stop"). */
  if (!dcp_token_matcher_limit (g->matcher, (guint) MIN (g->max_new, (gint64) G_MAXUINT), error))
    return FALSE;
  g->n_words = (vocab + 31) / 32;
  g->allowed = g_new0 (guint32, g->n_words);
  g->stops_only = g_new0 (guint32, g->n_words);
  for (guint i = 0; i < self->eos->len; i++)
    {
      guint32 id = g_array_index (self->eos, guint32, i);

      if (id < vocab)
        g->stops_only[id / 32] |= 1u << (id % 32);
    }
  return TRUE;
}

/* Renders and encodes the prompt and makes the per-sequence parts. */
static gboolean
generation_start (Generation *g, GError **error)
{
  Executor *self = g->exec;
  DcpRequest *request = g->request;
  const DcpModelConfig *config = dcp_backend_get_config (self->backend);
  g_autofree char *text = NULL;
  DcpLoopGuardParams guard;
  DcpOutputParserOptions parse = { 0 };
  gboolean chat = request->kind == DCP_REQUEST_CHAT;

  g->prompt = encode_prompt (self, request, &text, &g->images, error);
  if (g->prompt == NULL)
    return FALSE;
  g->usage.prompt_tokens = g->prompt->len;
  if (g->prompt->len == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "prompt: it is empty");
      return FALSE;
    }
  if ((gint64) g->prompt->len >= self->context_length)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE, "prompt is too long: %u tokens > %" G_GINT64_FORMAT " maximum",
                   g->prompt->len, self->context_length - 1);
      return FALSE;
    }
  for (guint i = 0; i < g->prompt->len; i++)
    if (g_array_index (g->prompt, guint32, i) >= config->vocab_size)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "prompt: token %u is outside the model's vocabulary of %u",
                     g_array_index (g->prompt, guint32, i), config->vocab_size);
        return FALSE;
      }
  g->max_new = self->context_length - g->prompt->len;
  if (request->max_tokens >= 0)
    g->max_new = MIN (g->max_new, request->max_tokens);

  sampler_params (self, &request->sampling, g->choice, &g->params);

  g->in_thinking = g->pick_thinking = chat && self->think_start >= 0 && prompt_opens_thinking (text);
  if (!constrain (g, error))
    return FALSE;
  dcp_loop_guard_params_init (&guard);
  guard.mode = (DcpLoopGuardMode) g_atomic_int_get (&self->loop_guard);
  /* Ending a constrained answer in a loop would leave its JSON unfinished: the guard bans the
   * token that continues the loop instead. */
  if (g->matcher != NULL && guard.mode != DCP_LOOP_GUARD_OFF)
    guard.mode = DCP_LOOP_GUARD_ESCAPE;
  guard.think_start_token = self->think_start;
  guard.think_end_token = self->think_end;
  guard.in_thinking = g->in_thinking;
  g->guard = dcp_loop_guard_new (&guard);
  g->forced = g_array_new (FALSE, FALSE, sizeof (guint32));
  if (request->thinking_budget >= 0)
    {
      g->budget_close = g_array_new (FALSE, FALSE, sizeof (guint32));
      dcp_tokenizer_encode (self->tokenizer, "</think>\n\n", -1, DCP_TOKENIZER_ENCODE_DEFAULT,
                            g->budget_close);
    }

  parse.reasoning = chat && self->think_start >= 0;
  g->parse_reasoning = parse.reasoning;
  if (request->logprobs)
    g->logprobs = json_array_new ();
  parse.thinking_open = g->in_thinking;
  if (chat && request->tools != NULL && JSON_NODE_HOLDS_ARRAY (request->tools))
    {
      parse.tool_calls = TRUE;
      parse.tools = json_node_get_array (request->tools);
    }
  parse.stop = (const char * const *) request->stop;
  g->parser = dcp_output_parser_new (&parse);
  dcp_output_parser_set_id_seed (g->parser, (guint32) g->params.seed);
  g->detok = dcp_token_stream_new (self->tokenizer, DCP_TOKENIZER_DECODE_DEFAULT);
  g->events = dcp_output_events_new ();
  g->text = g_string_new (NULL);
  return TRUE;
}

/* OpenAI's floor for a probability of zero (JSON has no -Infinity). */
#define LOGPROB_FLOOR -9999.0

/* "token" (the token's bytes as UTF-8, an incomplete character replaced), "logprob" and
 * "bytes" of one token. */
static void
add_token_members (JsonBuilder *b, DcpTokenizer *tokenizer, guint32 token, double logprob)
{
  gsize len = 0;
  const guint8 *bytes = dcp_tokenizer_get_token_bytes (tokenizer, token, &len);
  g_autofree char *text = bytes != NULL ? g_utf8_make_valid ((const char *) bytes, (gssize) len)
                                        : g_strdup ("");

  json_builder_set_member_name (b, "token");
  json_builder_add_string_value (b, text);
  json_builder_set_member_name (b, "logprob");
  json_builder_add_double_value (b, isfinite (logprob) ? MAX (logprob, LOGPROB_FLOOR) : LOGPROB_FLOOR);
  json_builder_set_member_name (b, "bytes");
  json_builder_begin_array (b);
  for (gsize i = 0; i < len; i++)
    json_builder_add_int_value (b, bytes[i]);
  json_builder_end_array (b);
}

/* The logprobs entry of a chosen token (json-glib, text thread). */
static JsonNode *
logprobs_entry (Generation *g, const DcpTokenLogprobs *lp)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  add_token_members (b, g->exec->tokenizer, lp->token, lp->logprob);
  json_builder_set_member_name (b, "top_logprobs");
  json_builder_begin_array (b);
  for (guint i = 0; i < lp->n_top; i++)
    {
      json_builder_begin_object (b);
      add_token_members (b, g->exec->tokenizer, lp->top[i], lp->top_logprob[i]);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* Step thread: the token is chosen. Feeds what the next pick decides from, from the token id
 * alone: the loop guard, the thinking state and the thinking budget. */
gboolean
dcp_generation_accept_id (DcpGeneration *g, guint32 token)
{
  Executor *self;
  DcpLoopVerdict verdict;

  g_return_val_if_fail (g != NULL, TRUE);
  self = g->exec;
  if ((gint64) token == self->think_end)
    g->pick_thinking = FALSE;
  else if (g->pick_thinking)
    g->pick_reasoning++;
  else if ((gint64) token == self->think_start)
    g->pick_thinking = TRUE;

  verdict = dcp_loop_guard_push (g->guard, token);
  if (verdict.action == DCP_LOOP_ACTION_STOP)
    {
      g_message ("%s: the answer repeats itself (period %u); stopped", g->request->id, verdict.period);
      return TRUE;
    }
  if (verdict.action == DCP_LOOP_ACTION_FORCE && g->forced->len == 0)
    g_array_append_val (g->forced, verdict.token);
  else if (verdict.action == DCP_LOOP_ACTION_BAN)
    {
      g->banned = verdict.token;
      g->has_banned = TRUE;
    }
  /* The thinking budget is spent: "</think>\n\n" comes next. */
  if (g->budget_close != NULL && g->pick_thinking && !g->budget_spent &&
      g->pick_reasoning >= g->request->thinking_budget)
    {
      g->budget_spent = TRUE;
      g_array_append_vals (g->forced, g->budget_close->data, g->budget_close->len);
    }
  if (g->matcher != NULL)
    {
      g_autoptr(GError) error = NULL;

      /* Only a token outside the grammar could fail, and none is drawn or forced (pick). */
      if (!dcp_token_matcher_accept (g->matcher, token, &error))
        {
          g_warning ("%s: %s; the rest of the answer is not constrained", g->request->id, error->message);
          g_clear_pointer (&g->matcher, dcp_token_matcher_free);
        }
    }
  return FALSE;
}

static gboolean
mask_has (const guint32 *mask, guint n_words, guint32 id)
{
  return id / 32 < n_words && (mask[id / 32] >> (id % 32)) & 1;
}

/* The tokens the grammar allows next over the model's vocabulary (NULL: unconstrained). Once
 * the grammar holds a whole value, only the stop tokens. */
const guint32 *
dcp_generation_get_allowed (DcpGeneration *g)
{
  guint n;

  g_return_val_if_fail (g != NULL, NULL);
  if (g->matcher == NULL)
    return NULL;
  if (dcp_token_matcher_is_complete (g->matcher))
    return g->stops_only;
  n = MIN (g->n_words, dcp_token_matcher_get_n_words (g->matcher));
  memcpy (g->allowed, dcp_token_matcher_get_mask (g->matcher), n * sizeof (guint32));
  return g->allowed;
}

/* Before the next token: the first queued forced token ("</think>\n\n" of a spent thinking
 * budget, the loop guard's end-thinking), else the loop guard's escape ban for this step. */
DcpSeqPick
dcp_generation_pick (DcpGeneration *g, guint32 *token)
{
  DcpSeqPick pick = DCP_SEQ_PICK_SAMPLE;

  g_return_val_if_fail (g != NULL && token != NULL, DCP_SEQ_PICK_SAMPLE);
  /* A grammar outranks the thinking budget and the loop guard: a forced token it does not allow
   * is dropped (with what was queued after it), a ban of the only token it allows too. */
  if (g->matcher != NULL && (g->forced->len > 0 || g->has_banned))
    {
      const guint32 *mask = dcp_generation_get_allowed (g);
      guint n_allowed = 0;

      if (g->forced->len > 0 && !mask_has (mask, g->n_words, g_array_index (g->forced, guint32, 0)))
        g_array_set_size (g->forced, 0);
      for (guint i = 0; g->has_banned && i < g->n_words && n_allowed < 2; i++)
        n_allowed += __builtin_popcount (mask[i]);
      if (n_allowed < 2)
        g->has_banned = FALSE;
    }
  if (g->forced->len > 0)
    {
      *token = g_array_index (g->forced, guint32, 0);
      g_array_remove_index (g->forced, 0);
      pick = DCP_SEQ_PICK_FORCE;
    }
  else if (g->has_banned)
    {
      *token = g->banned;
      pick = DCP_SEQ_PICK_BAN;
    }
  g->has_banned = FALSE;
  return pick;
}

/* Log-softmax of the raw logits (before temperature, penalties and bans) for the chosen token
 * and the request's top_logprobs most likely tokens, most likely first (ties: the lower id
 * first). Numbers only: the text thread writes them out. */
DcpTokenLogprobs *
dcp_generation_logprobs (DcpGeneration *g, guint32 token, const float *logits)
{
  guint vocab;
  guint k;
  DcpTokenLogprobs *lp;
  double max = -INFINITY, sum = 0, log_sum;

  g_return_val_if_fail (g != NULL, NULL);
  if (!g->request->logprobs || logits == NULL)
    return NULL;
  vocab = dcp_backend_get_config (g->exec->backend)->vocab_size;
  k = MIN (MIN (g->request->top_logprobs, vocab), DCP_TOP_LOGPROBS_MAX);
  lp = g_new0 (DcpTokenLogprobs, 1);
  for (guint i = 0; i < vocab; i++)
    if (logits[i] > max)
      max = logits[i];
  for (guint i = 0; i < vocab; i++)
    sum += exp (logits[i] - max);
  log_sum = log (sum);

  /* Insertion into a sorted list of k: the vocabulary is large, k at most 20. */
  for (guint i = 0; i < vocab && k > 0; i++)
    {
      guint at = lp->n_top;

      if (lp->n_top == k && logits[i] <= logits[lp->top[k - 1]])
        continue;
      while (at > 0 && logits[i] > logits[lp->top[at - 1]])
        at--;
      if (lp->n_top < k)
        lp->n_top++;
      memmove (lp->top + at + 1, lp->top + at, (lp->n_top - 1 - at) * sizeof *lp->top);
      lp->top[at] = i;
    }
  lp->token = token;
  lp->logprob = (logits[token] - max) - log_sum;
  for (guint i = 0; i < lp->n_top; i++)
    lp->top_logprob[i] = (logits[lp->top[i]] - max) - log_sum;
  return lp;
}

/* Text thread: a chosen token becomes text and events. TRUE when the output parser ended the
 * answer (a stop string), with *reason set. */
gboolean
dcp_generation_push_token (DcpGeneration *g, guint32 token, const DcpTokenLogprobs *lp,
                           DcpFinishReason *reason)
{
  Executor *self;
  gboolean reasoning;

  g_return_val_if_fail (g != NULL && reason != NULL, TRUE);
  self = g->exec;
  if (g->first_token_us == 0)
    g->first_token_us = g_get_monotonic_time ();
  g->usage.completion_tokens++;
  /* </think> closes the reasoning and is not part of it. */
  if ((gint64) token == self->think_end)
    g->in_thinking = FALSE;
  else if (g->in_thinking)
    g->usage.reasoning_tokens++;
  else if ((gint64) token == self->think_start)
    g->in_thinking = TRUE;
  /* The thinking tags and what lies between them go to reasoning when the parser splits it. */
  reasoning = g->parse_reasoning &&
    (g->in_thinking || (gint64) token == self->think_end || (gint64) token == self->think_start);
  if (g->logprobs != NULL && lp != NULL && !reasoning)
    json_array_add_element (g->logprobs, logprobs_entry (g, lp));

  g_string_truncate (g->text, 0);
  dcp_token_stream_push (g->detok, token, g->text);
  if (g->text->len > 0 && dcp_output_parser_feed (g->parser, g->text->str, g->text->len, g->events))
    {
      emit_output (g);
      *reason = DCP_FINISH_STOP;
      return TRUE;
    }
  emit_output (g);
  return FALSE;
}

void
dcp_generation_finish (DcpGeneration *g, DcpFinishReason reason, gint64 cached_prompt_tokens,
                       double queue_ms)
{
  DcpEvent *event;
  gint64 now = g_get_monotonic_time ();
  gint64 first;

  g_return_if_fail (g != NULL);
  first = g->first_token_us ? g->first_token_us : now;
  if (reason != DCP_FINISH_CANCELLED)
    {
      g_string_truncate (g->text, 0);
      dcp_token_stream_flush (g->detok, g->text);
      if (g->text->len > 0)
        dcp_output_parser_feed (g->parser, g->text->str, g->text->len, g->events);
      dcp_output_parser_finish (g->parser, g->events);
      emit_output (g);
    }
  event = dcp_event_new (DCP_EVENT_FINISH);
  if (reason == DCP_FINISH_STOP && dcp_output_parser_get_n_tool_calls (g->parser) > 0)
    reason = DCP_FINISH_TOOL_CALLS;
  event->reason = reason;
  event->stop = g_strdup (dcp_output_parser_get_stop_string (g->parser));
  event->usage = g->usage;
  event->usage.cached_prompt_tokens = cached_prompt_tokens;
  event->usage.queue_ms = queue_ms;
  event->usage.prompt_ms = (first - g->start_us) / 1000.0;
  event->usage.generation_ms = (now - first) / 1000.0;
  dcp_event_sink_emit (g->sink, event);
}

void
dcp_model_executor_free (DcpModelExecutor *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->template, dcp_chat_template_free);
  g_clear_pointer (&self->vision, dcp_prompt_vision_free);
  g_clear_pointer (&self->trie, dcp_token_trie_unref);
  g_clear_pointer (&self->tokenizer, dcp_tokenizer_unref);
  g_clear_object (&self->backend);
  g_clear_pointer (&self->model, dcp_model_source_free);
  g_clear_pointer (&self->eos, g_array_unref);
  g_mutex_clear (&self->template_lock);
  g_mutex_clear (&self->trie_lock);
  g_free (self->name);
  g_free (self);
}

static char *
default_name (const char *path)
{
  g_autofree char *base = g_path_get_basename (path);

  if (g_str_has_suffix (base, ".mcapy"))
    base[strlen (base) - strlen (".mcapy")] = '\0';
  return g_steal_pointer (&base);
}

/* The tower, where the backend reads images and the tokenizer writes the marker as the
 * config's ids. */
static gboolean
open_vision (Executor *self, GError **error)
{
  static const char *const markers[] = { "<|vision_start|>", "<|image_pad|>", "<|vision_end|>" };
  g_autoptr(DcpPromptVision) vision = NULL;
  guint32 id;

  if (!dcp_backend_takes_embeddings (self->backend))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "--vision: the %s backend does not read images",
                   dcp_backend_get_name (self->backend));
      return FALSE;
    }
  vision = dcp_prompt_vision_new (self->model, self->backend, 0, error);
  if (vision == NULL)
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (markers); i++)
    if (!dcp_tokenizer_token_to_id (self->tokenizer, markers[i], &id))
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                     "--vision: the tokenizer has no %s token", markers[i]);
        return FALSE;
      }
  dcp_tokenizer_token_to_id (self->tokenizer, "<|image_pad|>", &id);
  if (id != dcp_prompt_vision_get_image_token (vision))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "--vision: the tokenizer's <|image_pad|> is %u, the config's image_token_id %u",
                   id, dcp_prompt_vision_get_image_token (vision));
      return FALSE;
    }
  self->vision = g_steal_pointer (&vision);
  return TRUE;
}

DcpModelExecutor *
dcp_model_executor_new (DcpModelSource                *model,
                        DcpBackend                    *backend,
                        const DcpModelExecutorOptions *options,
                        GError                       **error)
{
  g_autoptr(DcpModelExecutor) self = NULL;
  const DcpModelConfig *config;
  JsonNode *tokenizer_json;
  const char *template;
  JsonObject *tokenizer_config;
  guint32 id;

  g_return_val_if_fail (model != NULL && DCP_IS_BACKEND (backend) && options != NULL, NULL);
  self = g_new0 (DcpModelExecutor, 1);
  g_mutex_init (&self->template_lock);
  g_mutex_init (&self->trie_lock);
  self->model = model;
  self->backend = g_object_ref (backend);
  self->eos = g_array_new (FALSE, FALSE, sizeof (guint32));
  config = dcp_model_source_get_config (model);
  self->name = options->name ? g_strdup (options->name) : default_name (dcp_model_source_get_path (model));
  self->context_length = options->context_length > 0 ? options->context_length
                                                     : (gint64) config->max_position_embeddings;
  if (options->loop_guard != NULL && !dcp_model_executor_set_loop_guard (self, options->loop_guard, error))
    return NULL;

  tokenizer_json = dcp_model_source_get_tokenizer (model);
  if (tokenizer_json == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s: the model has no tokenizer",
                   dcp_model_source_get_path (model));
      return NULL;
    }
  self->tokenizer = dcp_tokenizer_new_from_json (tokenizer_json, error);
  if (self->tokenizer == NULL)
    return NULL;
  tokenizer_config = dcp_model_source_get_tokenizer_config (model);
  template = dcp_model_source_get_chat_template (model);
  if (template != NULL)
    {
      self->template = dcp_chat_template_new (template, error);
      if (self->template == NULL)
        return NULL;
      dcp_chat_template_set_bos_token (self->template, special_token (tokenizer_config, "bos_token"));
      dcp_chat_template_set_eos_token (self->template, special_token (tokenizer_config, "eos_token"));
    }
  /* Qwen3.5's templates write tool calls as <function=NAME>, Qwen3's as JSON. */
  self->tool_form = template != NULL && strstr (template, "<function=") != NULL ? DCP_TOOL_CALL_FORM_XML
                                                                               : DCP_TOOL_CALL_FORM_JSON;
  self->think_start = dcp_tokenizer_token_to_id (self->tokenizer, "<think>", &id) ? (gint64) id : -1;
  self->think_end = dcp_tokenizer_token_to_id (self->tokenizer, "</think>", &id) ? (gint64) id : -1;
  collect_eos (self, dcp_model_source_get_generation (model), special_token (tokenizer_config, "eos_token"));
  read_defaults (self, dcp_model_source_get_generation (model));
  self->model_has_vision = config->has_vision;
  if (options->vision && !open_vision (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

gboolean
dcp_model_executor_get_vision_weights (DcpModelExecutor *self, DcpIntegrityWeights *weights)
{
  g_return_val_if_fail (self != NULL && weights != NULL, FALSE);
  if (self->vision == NULL)
    return FALSE;
  dcp_prompt_vision_get_weights (self->vision, weights);
  return TRUE;
}

DcpBackend *
dcp_model_executor_get_backend (DcpModelExecutor *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->backend;
}

const guint32 *
dcp_model_executor_get_stop_tokens (DcpModelExecutor *self, guint *n_tokens)
{
  g_return_val_if_fail (self != NULL && n_tokens != NULL, NULL);
  *n_tokens = self->eos->len;
  return (const guint32 *) self->eos->data;
}

DcpGeneration *
dcp_generation_new (DcpModelExecutor *executor, DcpRequest *request, guint choice,
                    DcpEventSink *sink, GError **error)
{
  Generation *g;

  g_return_val_if_fail (executor != NULL && request != NULL && sink != NULL, NULL);
  g = g_new0 (Generation, 1);
  g->exec = executor;
  g->request = request;
  g->sink = sink;
  g->choice = choice;
  g->start_us = g_get_monotonic_time ();
  if (!generation_start (g, error))
    {
      dcp_generation_free (g);
      return NULL;
    }
  return g;
}

DcpPromptImages *
dcp_generation_get_images (DcpGeneration *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  return g->images;
}

const guint32 *
dcp_generation_get_prompt (DcpGeneration *g, guint *n_tokens)
{
  g_return_val_if_fail (g != NULL && n_tokens != NULL, NULL);
  *n_tokens = g->prompt->len;
  return (const guint32 *) g->prompt->data;
}

const DcpSamplerParams *
dcp_generation_get_sampling (DcpGeneration *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  return &g->params;
}

gint64
dcp_generation_get_max_tokens (DcpGeneration *g)
{
  g_return_val_if_fail (g != NULL, 0);
  return g->max_new;
}

void
dcp_generation_free (DcpGeneration *g)
{
  if (g == NULL)
    return;
  generation_clear (g);
  g_free (g);
}

guint
dcp_generation_get_opening (DcpGeneration *g)
{
  g_return_val_if_fail (g != NULL, 0);
  return opening_length (g->exec, g->request, g->prompt);
}

/* A member's string, or "" when it is absent or not a string. */
static const char *
member_string (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return "";
  return json_node_get_string (node);
}

/* A tool call's arguments: an object, or (as some clients send them) its JSON text. */
static gboolean
call_runs_in_background (JsonObject *call)
{
  JsonNode *function = json_object_get_member (call, "function");
  JsonNode *args, *flag;
  g_autoptr(JsonNode) parsed = NULL;
  g_autofree char *name = NULL;

  if (function == NULL || !JSON_NODE_HOLDS_OBJECT (function))
    return FALSE;
  name = g_ascii_strdown (member_string (json_node_get_object (function), "name"), -1);
  if (strstr (name, "background") != NULL)
    return TRUE;
  args = json_object_get_member (json_node_get_object (function), "arguments");
  if (args != NULL && JSON_NODE_HOLDS_VALUE (args) && json_node_get_value_type (args) == G_TYPE_STRING)
    args = parsed = json_from_string (json_node_get_string (args), NULL);
  if (args == NULL || !JSON_NODE_HOLDS_OBJECT (args))
    return FALSE;
  flag = json_object_get_member (json_node_get_object (args), "run_in_background");
  if (flag == NULL || !JSON_NODE_HOLDS_VALUE (flag))
    return FALSE;
  if (json_node_get_value_type (flag) == G_TYPE_BOOLEAN)
    return json_node_get_boolean (flag);
  return json_node_get_value_type (flag) == G_TYPE_STRING &&
         g_ascii_strcasecmp (json_node_get_string (flag), "true") == 0;
}

gboolean
dcp_model_executor_runs_in_background (const DcpRequest *request)
{
  JsonArray *messages;
  guint i;

  g_return_val_if_fail (request != NULL, FALSE);
  if (request->kind != DCP_REQUEST_CHAT || request->messages == NULL ||
      !JSON_NODE_HOLDS_ARRAY (request->messages))
    return FALSE;
  messages = json_node_get_array (request->messages);
  for (i = json_array_get_length (messages); i > 0; i--)
    {
      JsonNode *node = json_array_get_element (messages, i - 1);
      JsonObject *message;
      JsonNode *calls;
      const char *role;

      if (!JSON_NODE_HOLDS_OBJECT (node))
        return FALSE;
      message = json_node_get_object (node);
      role = member_string (message, "role");
      if (g_strcmp0 (role, "tool") == 0)
        continue;
      if (g_strcmp0 (role, "assistant") != 0)
        return FALSE;
      calls = json_object_get_member (message, "tool_calls");
      if (calls == NULL || !JSON_NODE_HOLDS_ARRAY (calls))
        return FALSE;
      for (guint j = 0; j < json_array_get_length (json_node_get_array (calls)); j++)
        {
          JsonNode *call = json_array_get_element (json_node_get_array (calls), j);

          if (JSON_NODE_HOLDS_OBJECT (call) && call_runs_in_background (json_node_get_object (call)))
            return TRUE;
        }
      return FALSE;
    }
  return FALSE;
}

gboolean
dcp_model_executor_is_last_turn (const DcpRequest *request)
{
  g_return_val_if_fail (request != NULL, FALSE);
  return request->tools == NULL || !JSON_NODE_HOLDS_ARRAY (request->tools) ||
         json_array_get_length (json_node_get_array (request->tools)) == 0;
}

gboolean
dcp_model_executor_set_loop_guard (DcpModelExecutor *self, const char *loop_guard, GError **error)
{
  g_autofree char *name = NULL;
  DcpLoopGuardMode mode;

  g_return_val_if_fail (self != NULL && loop_guard != NULL, FALSE);
  name = g_strdelimit (g_strdup (loop_guard), "-", '_');
  if (!dcp_loop_guard_mode_from_string (name, &mode))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "loop-guard: “%s” is not stop, end-thinking, escape or off", loop_guard);
      return FALSE;
    }
  g_atomic_int_set (&self->loop_guard, (gint) mode);
  return TRUE;
}

const char *
dcp_model_executor_get_loop_guard (DcpModelExecutor *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return dcp_loop_guard_mode_to_string ((DcpLoopGuardMode) g_atomic_int_get (&self->loop_guard));
}
