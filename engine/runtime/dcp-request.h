/* SPDX-License-Identifier: MIT */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* DcpRequest: one generation request in a neutral shape that every HTTP API is translated into
 * and that the model side (chat template, tokenizer, scheduler) consumes.
 *
 * Messages (kind DCP_REQUEST_CHAT) are a JSON array in the OpenAI-like shape a chat template
 * renders directly:
 *   {"role": "system"|"user"|"assistant"|"tool",
 *    "content": "text" | [{"type":"text","text":...} | {"type":"image","media_type":...,"data":base64}],
 *    "reasoning_content": "...",                                  (assistant, optional)
 *    "tool_calls": [{"id":..., "type":"function",
 *                    "function": {"name":..., "arguments": {...object...}}}],   (assistant)
 *    "tool_call_id": "...", "name": "..."}                         (tool)
 * Tools are [{"type":"function","function":{"name","description","parameters"}}].
 * tool_choice is "auto", "none", "required" or {"type":"function","function":{"name":...}};
 * when it forces a call, the tools' parameter schemas were checked to compile
 * (dcp_grammar_new_tool_call) when the request was read.
 * A raw prompt (kind DCP_REQUEST_PROMPT, /v1/completions) is a string fed as is.
 *
 * A request is filled on the main thread and is read-only once submitted; it is reference
 * counted (atomically) because the engine thread holds it while it runs. */

typedef enum {
  DCP_REQUEST_CHAT,
  DCP_REQUEST_PROMPT,
} DcpRequestKind;

/* The shape the answer must have (response_format, output_config.format, text.format). The
 * schema was checked to compile (dcp_grammar_new_json_schema) when the request was read. */
typedef enum {
  DCP_OUTPUT_FORMAT_TEXT,
  DCP_OUTPUT_FORMAT_JSON_OBJECT,     /* any JSON object */
  DCP_OUTPUT_FORMAT_JSON_SCHEMA,     /* a value valid against output_schema */
} DcpOutputFormat;

typedef struct {
  double   temperature;         /* < 0: the model's default */
  double   top_p;               /* < 0: default */
  int      top_k;               /* < 0: default; 0: off */
  double   min_p;               /* < 0: default */
  double   presence_penalty;    /* 0: off */
  double   frequency_penalty;   /* 0: off */
  double   repetition_penalty;  /* 1: off */
  gboolean has_seed;
  guint64  seed;
} DcpSampling;

typedef struct {
  gint           ref_count;
  char          *id;                /* the API's id for the answer ("chatcmpl-...", "msg_...") */
  char          *model;             /* the name the client asked for, echoed back */
  DcpRequestKind kind;
  JsonNode      *messages;          /* CHAT: array, see above */
  JsonNode      *tools;             /* CHAT: array or NULL */
  JsonNode      *tool_choice;       /* NULL: "auto"; "required" and a named function are forced */
  DcpOutputFormat output_format;
  JsonNode      *output_schema;     /* JSON_SCHEMA: the schema */
  char          *prompt;            /* PROMPT */
  JsonObject    *template_kwargs;   /* enable_thinking, reasoning_effort, preserve_thinking, ... */
  DcpSampling    sampling;
  gint64         max_tokens;        /* completion tokens (reasoning included); < 0: up to the context */
  gint64         thinking_budget;   /* reasoning tokens before thinking is ended; < 0: no limit */
  char         **stop;              /* stop strings (not included in the output), NULL-terminated */
  guint          n;                 /* choices, >= 1 */
  gboolean       logprobs;
  guint          top_logprobs;
  gboolean       stream;
  GCancellable  *cancellable;       /* cancelled when the client goes away */
} DcpRequest;

GType        dcp_request_get_type        (void) G_GNUC_CONST;
DcpRequest  *dcp_request_new             (DcpRequestKind kind);
DcpRequest  *dcp_request_ref             (DcpRequest *request);
void         dcp_request_unref           (DcpRequest *request);
gboolean     dcp_request_thinking_enabled (const DcpRequest *request);
const char  *dcp_request_last_user_text  (const DcpRequest *request);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpRequest, dcp_request_unref)

G_END_DECLS
