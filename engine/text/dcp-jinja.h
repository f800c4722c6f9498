/* SPDX-License-Identifier: MIT */
#pragma once

/* A Jinja interpreter for the subset of the language that model chat templates use, rendering
 * byte for byte what Python's jinja2 renders in the environment transformers sets up
 * (docs/CHAT-TEMPLATES.md lists the subset). A compiled template is immutable and may be
 * rendered any number of times, from any thread. */

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct _DcpJinjaTemplate DcpJinjaTemplate;
typedef struct _DcpJinjaValue DcpJinjaValue;

/* Errors: DCP_ERROR_CORRUPT_FILE for a syntax error (with line and column),
 * DCP_ERROR_NOT_SUPPORTED for a filter, test or tag this interpreter does not have. */
DcpJinjaTemplate *dcp_jinja_template_new    (const char *source, GError **error);
void              dcp_jinja_template_free   (DcpJinjaTemplate *tmpl);
/* Renders with `globals` (a dict value) as the template's variables. Errors: a template's
 * raise_exception() and any runtime error (undefined value used, wrong types) are
 * DCP_ERROR_INVALID_ARGUMENT; runaway recursion, loops or output are DCP_ERROR_TOO_LARGE. */
char             *dcp_jinja_template_render (DcpJinjaTemplate *tmpl, DcpJinjaValue *globals,
                                             GError **error);

DcpJinjaValue    *dcp_jinja_value_ref       (DcpJinjaValue *value);
void              dcp_jinja_value_unref     (DcpJinjaValue *value);
DcpJinjaValue    *dcp_jinja_value_new_json  (JsonNode *node /* nullable: None */);
DcpJinjaValue    *dcp_jinja_string_new      (const char *s);
DcpJinjaValue    *dcp_jinja_dict_new        (void);
void              dcp_jinja_dict_set        (DcpJinjaValue *dict, const char *key,
                                             DcpJinjaValue *value /* taken */);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpJinjaTemplate, dcp_jinja_template_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpJinjaValue, dcp_jinja_value_unref)

G_END_DECLS
