/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tool-call-parser"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-json-compact.h"
#include "dcp-output-event.h"
#include "dcp-stream-match.h"
#include "dcp-tool-arguments.h"
#include "dcp-tool-call-parser.h"

/* Finds tool calls in the streamed content of a generation (docs/OUTPUT-PARSING.md).
 *
 * A call is a <tool_call>…</tool_call> block holding either the Qwen3.5/Qwen3-Coder XML form
 *   <function=NAME>
 *   <parameter=ARG>
 *   VALUE
 *   </parameter>
 *   </function>
 * (several <function> blocks in one tool_call give several calls), or Qwen3's JSON form
 *   {"name": "NAME", "arguments": {...}}
 * told apart per call by the first character of the block. Text outside calls is content.
 *
 * The parser holds a call until its close tag and then emits it whole, arguments included, as one
 * event (no argument deltas). Content is emitted as it comes, except a tail that may still start
 * "<tool_call>" and whitespace that may be the template's separator before a call. Whitespace
 * around successful calls is the template's, not the model's answer, and is dropped.
 *
 * A block that does not parse (bad JSON, a missing </parameter> or </function>, an unknown function
 * when a tool list was given, no close tag by the end, another <tool_call> before the close tag)
 * is logged with g_warning and given back as content, byte for byte with the whitespace before
 * it: when no call succeeds, the content events add up to exactly the input. */

#define OPEN_TAG "<tool_call>"
#define CLOSE_TAG "</tool_call>"
#define FUNCTION_OPEN "<function="
#define FUNCTION_CLOSE "</function>"
#define PARAMETER_OPEN "<parameter="
#define PARAMETER_CLOSE "</parameter>"

typedef enum {
  STATE_TEXT,
  STATE_CALL,
} State;

struct _DcpToolCallParser {
  GHashTable *functions;  /* name -> JsonObject *properties (borrowed, may be NULL); NULL: no list */
  JsonArray *tools;
  GRand *rand;
  guint n_calls;
  State state;
  GString *pending;       /* TEXT: content held back; CALL: the block after its open tag */
  gsize scanned;          /* CALL: bytes of pending searched for tags already */
  GString *before;        /* CALL: whitespace that came before the open tag */
  gboolean skip_space;    /* a call just succeeded: whitespace that follows is dropped */
};

static JsonObject *
object_member (JsonObject *object,
               const char *name)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

static const char *
string_member (JsonObject *object,
               const char *name)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/* Makes a parser. tools: the request's tool list, OpenAI style ({"type": "function", "function":
 * {"name", "parameters"}}; a bare {"name", "parameters" or "input_schema"} is read too), or NULL.
 * With a list, calls of functions not in it are malformed; the parameter schemas in it decide the
 * JSON types of XML parameter values. */
DcpToolCallParser *
dcp_tool_call_parser_new (JsonArray *tools)
{
  DcpToolCallParser *self = g_new0 (DcpToolCallParser, 1);

  self->pending = g_string_new (NULL);
  self->before = g_string_new (NULL);
  self->rand = g_rand_new ();
  if (tools != NULL)
    {
      self->tools = json_array_ref (tools);
      self->functions = g_hash_table_new (g_str_hash, g_str_equal);
      for (guint i = 0; i < json_array_get_length (tools); i++)
        {
          JsonNode *node = json_array_get_element (tools, i);
          JsonObject *tool = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
          JsonObject *function = object_member (tool, "function");
          JsonObject *parameters;
          const char *name;

          if (function == NULL)
            function = tool;
          name = string_member (function, "name");
          if (name == NULL)
            continue;
          parameters = object_member (function, "parameters");
          if (parameters == NULL)
            parameters = object_member (function, "input_schema");
          g_hash_table_insert (self->functions, (gpointer) name, object_member (parameters, "properties"));
        }
    }
  return self;
}

void
dcp_tool_call_parser_free (DcpToolCallParser *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->functions, g_hash_table_unref);
  g_clear_pointer (&self->tools, json_array_unref);
  g_rand_free (self->rand);
  g_string_free (self->pending, TRUE);
  g_string_free (self->before, TRUE);
  g_free (self);
}

/* Makes the call ids a function of `seed` (for tests; by default they are random). */
void
dcp_tool_call_parser_set_id_seed (DcpToolCallParser *self,
                                  guint32            seed)
{
  g_return_if_fail (self != NULL);

  g_rand_set_seed (self->rand, seed);
}

/* How many calls were emitted so far. */
guint
dcp_tool_call_parser_get_n_calls (DcpToolCallParser *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->n_calls;
}

static gboolean
is_space (char c)
{
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static const char *
skip_spaces (const char *p,
             const char *end)
{
  while (p < end && is_space (*p))
    p++;
  return p;
}

static gboolean
starts_with (const char *p,
             const char *end,
             const char *prefix)
{
  gsize n = strlen (prefix);

  return (gsize) (end - p) >= n && memcmp (p, prefix, n) == 0;
}

static const char *
find (const char *p,
      const char *end,
      const char *needle)
{
  return g_strstr_len (p, end - p, needle);
}

/* Reads "NAME>" of a <function=NAME> or <parameter=NAME> tag; NULL if there is no '>' on the line
 * or the name is empty. */
static char *
read_tag_name (const char **p,
               const char  *end)
{
  const char *close = memchr (*p, '>', end - *p);
  char *name;

  if (close == NULL || memchr (*p, '\n', close - *p) != NULL)
    return NULL;
  name = g_strstrip (g_strndup (*p, close - *p));
  *p = close + 1;
  if (*name == '\0')
    g_clear_pointer (&name, g_free);
  return name;
}

/* The schema of one parameter: properties.NAME of the function, or NULL. */
static JsonObject *
parameter_schema (DcpToolCallParser *self,
                  const char        *function,
                  const char        *parameter)
{
  JsonObject *properties;

  if (self->functions == NULL)
    return NULL;
  properties = g_hash_table_lookup (self->functions, function);
  return object_member (properties, parameter);
}

static gboolean
check_known (DcpToolCallParser *self,
             const char        *name,
             GError           **error)
{
  if (self->functions != NULL && !g_hash_table_contains (self->functions, name))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "unknown function \"%s\"", name);
      return FALSE;
    }
  return TRUE;
}

typedef struct {
  char *name;
  char *arguments;
} Call;

/* Appends "NAME": with NAME as a JSON string. */
static void
append_key (GString    *out,
            const char *name)
{
  g_autoptr(JsonNode) key = json_node_new (JSON_NODE_VALUE);
  g_autofree char *json = NULL;

  json_node_set_string (key, name);
  json = dcp_json_to_compact (key);
  g_string_append (out, json);
  g_string_append_c (out, ':');
}

static void
call_clear (gpointer data)
{
  Call *call = data;

  g_free (call->name);
  g_free (call->arguments);
}

/* The arguments object from parameter names and their JSON values, in order. */
static char *
arguments_json (GPtrArray *keys,
                GPtrArray *values)
{
  GString *out = g_string_new ("{");

  for (guint i = 0; i < keys->len; i++)
    {
      if (i > 0)
        g_string_append_c (out, ',');
      append_key (out, keys->pdata[i]);
      g_string_append (out, values->pdata[i]);
    }
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}

/* One <function=NAME>…</function> block from *p; moves *p past it. A parameter value runs to the
 * first </parameter> that is followed (after whitespace) by another parameter or </function>, so a
 * value may itself contain "</parameter>". A repeated parameter keeps its first place and takes
 * the last value. */
static gboolean
parse_xml_function (DcpToolCallParser *self,
                    const char       **p,
                    const char        *end,
                    GArray            *calls,
                    GError           **error)
{
  g_autofree char *name = NULL;
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) values = g_ptr_array_new_with_free_func (g_free);
  Call call;

  *p += strlen (FUNCTION_OPEN);
  name = read_tag_name (p, end);
  if (name == NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "<function= without a name and '>'");
      return FALSE;
    }
  if (!check_known (self, name, error))
    return FALSE;

  for (;;)
    {
      g_autofree char *parameter = NULL;
      g_autofree char *value = NULL;
      const char *value_start, *value_end, *search;
      guint at;

      *p = skip_spaces (*p, end);
      if (starts_with (*p, end, FUNCTION_CLOSE))
        {
          *p += strlen (FUNCTION_CLOSE);
          break;
        }
      if (!starts_with (*p, end, PARAMETER_OPEN))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "function \"%s\": expected <parameter= or </function>", name);
          return FALSE;
        }
      *p += strlen (PARAMETER_OPEN);
      parameter = read_tag_name (p, end);
      if (parameter == NULL)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "function \"%s\": <parameter= without a name and '>'", name);
          return FALSE;
        }
      value_start = *p;
      value_end = NULL;
      for (search = *p; (search = find (search, end, PARAMETER_CLOSE)) != NULL; search++)
        {
          const char *next = skip_spaces (search + strlen (PARAMETER_CLOSE), end);

          if (starts_with (next, end, PARAMETER_OPEN) || starts_with (next, end, FUNCTION_CLOSE))
            {
              value_end = search;
              *p = next;
              break;
            }
        }
      if (value_end == NULL)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "function \"%s\": parameter \"%s\" has no </parameter> before </function>",
                       name, parameter);
          return FALSE;
        }
      /* The template writes "<parameter=NAME>\n" VALUE "\n</parameter>". */
      if (value_start < value_end && *value_start == '\n')
        value_start++;
      if (value_end > value_start && value_end[-1] == '\n')
        value_end--;
      value = g_strndup (value_start, value_end - value_start);
      if (g_ptr_array_find_with_equal_func (keys, parameter, g_str_equal, &at))
        {
          g_free (values->pdata[at]);
          values->pdata[at] = dcp_tool_argument_to_json (value, parameter_schema (self, name, parameter));
        }
      else
        {
          g_ptr_array_add (values, dcp_tool_argument_to_json (value, parameter_schema (self, name, parameter)));
          g_ptr_array_add (keys, g_steal_pointer (&parameter));
        }
    }
  call.name = g_steal_pointer (&name);
  call.arguments = arguments_json (keys, values);
  g_array_append_val (calls, call);
  return TRUE;
}

/* {"name": NAME, "arguments": {...}} ("parameters" read as "arguments"; arguments given as a
 * string holding a JSON object are read too). */
static gboolean
parse_json_call (DcpToolCallParser *self,
                 const char        *text,
                 GArray            *calls,
                 GError           **error)
{
  g_autoptr(JsonNode) root = dcp_json_parse_lenient (text);
  g_autoptr(JsonNode) parsed_arguments = NULL;
  JsonObject *object;
  JsonNode *arguments;
  const char *name;
  Call call;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "the JSON call does not parse as an object");
      return FALSE;
    }
  object = json_node_get_object (root);
  name = string_member (object, "name");
  if (name == NULL || *name == '\0')
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "the JSON call has no \"name\" string");
      return FALSE;
    }
  if (!check_known (self, name, error))
    return FALSE;
  arguments = json_object_get_member (object, "arguments");
  if (arguments == NULL)
    arguments = json_object_get_member (object, "parameters");
  if (arguments != NULL && JSON_NODE_HOLDS_VALUE (arguments) &&
      json_node_get_value_type (arguments) == G_TYPE_STRING)
    arguments = parsed_arguments = dcp_json_parse_lenient (json_node_get_string (arguments));
  if (arguments != NULL && !JSON_NODE_HOLDS_OBJECT (arguments) && !JSON_NODE_HOLDS_NULL (arguments))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "function \"%s\": \"arguments\" is not an object", name);
      return FALSE;
    }
  call.name = g_strdup (name);
  call.arguments = arguments != NULL && JSON_NODE_HOLDS_OBJECT (arguments)
                   ? dcp_json_to_compact (arguments) : g_strdup ("{}");
  g_array_append_val (calls, call);
  return TRUE;
}

/* The calls in the text between <tool_call> and </tool_call>. */
static gboolean
parse_block (DcpToolCallParser *self,
             const char        *text,
             gsize              len,
             GArray            *calls,
             GError           **error)
{
  const char *end = text + len;
  const char *p = skip_spaces (text, end);

  if (p < end && *p == '{')
    {
      g_autofree char *copy = g_strndup (text, len);

      return parse_json_call (self, copy, calls, error);
    }
  if (!starts_with (p, end, FUNCTION_OPEN))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "neither <function= nor a JSON object");
      return FALSE;
    }
  while (starts_with (p, end, FUNCTION_OPEN))
    {
      if (!parse_xml_function (self, &p, end, calls, error))
        return FALSE;
      p = skip_spaces (p, end);
    }
  if (p != end)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "text after </function>");
      return FALSE;
    }
  return TRUE;
}

static void
emit_call (DcpToolCallParser *self,
           Call              *call,
           GArray            *events)
{
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  DcpOutputEvent event = { 0 };
  char id[5 + 24 + 1] = "call_";

  for (int i = 0; i < 24; i++)
    id[5 + i] = alphabet[g_rand_int_range (self->rand, 0, sizeof alphabet - 1)];
  id[29] = '\0';
  event.kind = DCP_OUTPUT_EVENT_TOOL_CALL;
  event.id = g_strdup (id);
  event.name = g_steal_pointer (&call->name);
  event.arguments = g_steal_pointer (&call->arguments);
  event.index = self->n_calls++;
  g_array_append_val (events, event);
}

/* Gives a block that failed back as content: the whitespace before it, the open tag, the body
 * (`len` bytes of pending) and the close tag when there was one. */
static void
give_back (DcpToolCallParser *self,
           gsize              len,
           gboolean           closed,
           const char        *why,
           GArray            *events)
{
  g_autoptr(GString) raw = g_string_new (self->before->str);

  g_warning ("malformed tool call, returned as text: %s", why);
  g_string_append (raw, OPEN_TAG);
  g_string_append_len (raw, self->pending->str, len);
  if (closed)
    g_string_append (raw, CLOSE_TAG);
  dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, raw->str, raw->len);
  g_string_truncate (self->before, 0);
}

static void
close_block (DcpToolCallParser *self,
             gsize              len,
             GArray            *events)
{
  g_autoptr(GArray) calls = g_array_new (FALSE, TRUE, sizeof (Call));
  g_autoptr(GError) error = NULL;

  g_array_set_clear_func (calls, call_clear);
  if (!parse_block (self, self->pending->str, len, calls, &error))
    {
      give_back (self, len, TRUE, error->message, events);
      return;
    }
  for (guint i = 0; i < calls->len; i++)
    emit_call (self, &g_array_index (calls, Call, i), events);
  g_string_truncate (self->before, 0);
  self->skip_space = TRUE;
}

static gsize
trailing_spaces (const char *text,
                 gsize       len)
{
  gsize n = 0;

  while (n < len && is_space (text[len - 1 - n]))
    n++;
  return n;
}

static gboolean
step_text (DcpToolCallParser *self,
           GArray            *events)
{
  const char *needles[] = { OPEN_TAG, NULL };
  gsize pos, space;

  if (self->skip_space)
    {
      /* After a call: whitespace then another call is that call's separator; whitespace then
       * text is dropped; whitespace at the end is dropped by _finish. */
      gsize n = 0;
      gboolean found;

      while (n < self->pending->len && is_space (self->pending->str[n]))
        n++;
      if (n == self->pending->len)
        return FALSE;
      found = dcp_stream_match (self->pending->str, self->pending->len, needles, &pos, NULL);
      if (!found && pos <= n)
        return FALSE;
      self->skip_space = FALSE;
      if (!found || pos > n)
        {
          g_string_erase (self->pending, 0, n);
          return TRUE;
        }
    }
  if (dcp_stream_match (self->pending->str, self->pending->len, needles, &pos, NULL))
    {
      space = trailing_spaces (self->pending->str, pos);
      dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, self->pending->str, pos - space);
      g_string_truncate (self->before, 0);
      g_string_append_len (self->before, self->pending->str + pos - space, space);
      g_string_erase (self->pending, 0, pos + strlen (OPEN_TAG));
      self->state = STATE_CALL;
      self->scanned = 0;
      return TRUE;
    }
  pos -= trailing_spaces (self->pending->str, pos);
  dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, self->pending->str, pos);
  g_string_erase (self->pending, 0, pos);
  return FALSE;
}

static gboolean
step_call (DcpToolCallParser *self,
           GArray            *events)
{
  const char *needles[] = { CLOSE_TAG, OPEN_TAG, NULL };
  gsize from, pos;
  guint which;

  /* Only the new text (and a tag that may straddle the old end) needs searching. */
  from = self->scanned > strlen (CLOSE_TAG) ? self->scanned - strlen (CLOSE_TAG) : 0;
  if (!dcp_stream_match (self->pending->str + from, self->pending->len - from, needles, &pos, &which))
    {
      self->scanned = self->pending->len;
      return FALSE;
    }
  pos += from;
  if (which == 0)
    {
      close_block (self, pos, events);
      g_string_erase (self->pending, 0, pos + strlen (CLOSE_TAG));
    }
  else
    {
      give_back (self, pos, FALSE, "<tool_call> inside a <tool_call>", events);
      g_string_erase (self->pending, 0, pos);
    }
  self->state = STATE_TEXT;
  return TRUE;
}

/* Feeds the next piece of content (len -1: NUL-terminated) and appends the events it completes. */
void
dcp_tool_call_parser_feed (DcpToolCallParser *self,
                           const char        *text,
                           gssize             len,
                           GArray            *events)
{
  gboolean again = TRUE;

  g_return_if_fail (self != NULL);
  g_return_if_fail (text != NULL || len == 0);
  g_return_if_fail (events != NULL);

  if (len < 0)
    len = strlen (text);
  g_string_append_len (self->pending, text, len);
  while (again)
    again = self->state == STATE_TEXT ? step_text (self, events) : step_call (self, events);
}

/* Ends the content: held-back text is emitted; an unterminated call is given back as content. */
void
dcp_tool_call_parser_finish (DcpToolCallParser *self,
                             GArray            *events)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (events != NULL);

  if (self->state == STATE_CALL)
    give_back (self, self->pending->len, FALSE, "no </tool_call> before the end", events);
  else
    {
      gsize n = 0;

      while (self->skip_space && n < self->pending->len && is_space (self->pending->str[n]))
        n++;
      dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, self->pending->str + n,
                                     self->pending->len - n);
    }
  g_string_truncate (self->pending, 0);
  self->state = STATE_TEXT;
}
