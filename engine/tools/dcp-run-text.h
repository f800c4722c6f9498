/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-model-source.h"
#include "dcp-request.h"

G_BEGIN_DECLS

/* decapybara-run's text modes: what the tokenizer and chat template of a model make of text, and
 * generation through the engine's own model executor (the same path as the server). */

/* Prints the ids of text, comma-separated. */
gboolean dcp_run_encode (DcpModelSource *model, const char *text, GError **error);
/* Prints the text of comma-separated ids. */
gboolean dcp_run_decode (DcpModelSource *model, const char *ids, GError **error);
/* A chat request from a JSON file {"messages": [...], "tools": [...], "kwargs": {...}}. */
DcpRequest *dcp_run_load_chat (const char *path, GError **error);
/* Prints the rendered prompt of a chat file. */
gboolean dcp_run_render (DcpModelSource *model, const char *path, GError **error);
/* Runs request through a model executor over backend, printing the answer as it comes
 * (reasoning on stderr between <think> tags, tool calls as JSON lines) and, with timing, the
 * usage on stderr. Takes ownership of model. */
gboolean dcp_run_generate (DcpModelSource *model, DcpBackend *backend, DcpRequest *request,
                           gboolean timing, GError **error);

G_END_DECLS
