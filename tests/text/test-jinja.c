/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "test-jinja"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "dcp-chat-template.h"
#include "dcp-error.h"
#include "dcp-jinja.h"

/* The Jinja language piece by piece. Every expected string below is what Python jinja2 3.1.6
 * renders for the same template and variables in transformers' environment (trim_blocks,
 * lstrip_blocks, loopcontrols, json.dumps tojson); the whole-template comparison against jinja2
 * is the chat-template-conformance test. */

typedef struct {
  const char *name;
  const char *source;
  const char *expected;
} RenderCase;

static const char *const variables =
  "{\"d\": {\"b\": 1, \"a\": [1, \"x\"], \"c\": null}, \"n\": 3, \"s\": \"Hello\", "
  "\"items\": [{\"n\": \"a\", \"k\": 1}, {\"n\": \"b\", \"k\": 2}, {\"n\": \"c\", \"k\": 3}]}";

static const RenderCase render_cases[] = {
  { "arithmetic",
    "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ -7 // 2 }} {{ 1 - 2.5 }}",
    "7 3 3.5 2 1024 -4 -1.5" },
  { "concat",
    "{{ 'a' ~ 1 ~ none ~ true ~ undefined_thing ~ 2.0 }}",
    "a1NoneTrue2.0" },
  { "print-values",
    "{{ none }} {{ true }} {{ false }} {{ nothing }}|{{ [1, 'a', none, true, 2.5] }} {{ {'a': \"it's\", 'b': [1]} }} {{ (1,) }} {{ (1, 2) }}",
    "None True False |[1, 'a', None, True, 2.5] {'a': \"it's\", 'b': [1]} (1,) (1, 2)" },
  { "floats",
    "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 123456789012345678.0 }} {{ 1e16 }} {{ 0.0001 }} {{ 3 / 4 }}",
    "1.0 0.30000000000000004 1e+20 1.5e-07 1.2345678901234568e+17 1e+16 0.0001 0.75" },
  { "slicing",
    "{{ 'abc'[::-1] }} {{ [1,2,3,4,5][1:4:2] }} {{ 'héllo'[1] }} {{ [1,2,3][-1] }} {{ [1,2,3][5] is defined }} {{ [1,2,3][:-1] }} {{ 'abcdef'[-3:] }} {{ [1,2,3,4][::-2] }}",
    "cba [2, 4] é 3 False [1, 2] def [4, 2]" },
  { "comparison",
    "{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1,2] == [1,2] }} {{ 'a' in 'cat' }} {{ 3 not in [1,2] }} {{ 'k' in {'k': 1} }} {{ 2 >= 3 }} {{ none == none }} {{ true == 1 }}",
    "True True True True True True False True True" },
  { "logic",
    "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }} {{ not 0 }} {{ not 'a' }} {{ 'y' if n > 2 else 'n' }}[{{ 'y' if false }}]",
    "x b [] True False y[]" },
  { "precedence",
    "{{ 'x' ~ (1 + 2) }} {{ 'a' + 'b' ~ 'c' }} {{ s|length > 3 }} {{ not d is defined }} {{ -n|abs }} {{ '\\n' + ' t '|trim + '\\n' }}",
    "x3 abc True False 3 \nt\n" },
  { "attributes",
    "{{ d.b }} {{ d['a'][1] }} {{ d.a.1 }} {{ d.zz is defined }} {{ d.c is none }} {{ s.upper() }} {{ d.get('zz', 'no') }} {{ d.keys()|list }} {{ d.values()|list }}",
    "1 x x False True HELLO no ['b', 'a', 'c'] [1, [1, 'x'], None]" },
  { "filters-string",
    "[{{ '  x  '|trim }}] [{{ 'xxaxx'|trim('x') }}] {{ 'a-b c'|replace('-', '_')|replace(' ', '') }} {{ 'hello wORLD'|title }} {{ 'hELLO'|capitalize }} {{ 'x'|upper }} {{ 'X'|lower }} {{ 5|string ~ 'x' }}",
    "[x] [a] a_bc Hello World Hello X x 5x" },
  { "filters-sequence",
    "{{ s|length }} {{ d|length }} {{ items|length }} {{ [3,1]|first }}{{ [3,1]|last }} {{ items|map(attribute='n')|join(', ') }} {{ [1,2,3]|join }} {{ 'abc'|list }}",
    "5 3 3 31 a, b, c 123 ['a', 'b', 'c']" },
  { "filters-default",
    "{{ nothing|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ ''|d('e', boolean=true) }} {{ 0|default(7) }}",
    "d None d e 0" },
  { "filters-select",
    "{{ ['a','b','c']|reject('in', ['b'])|list }} {{ [1,2,3,4]|select('odd')|list }} {{ items|selectattr('k', 'gt', 1)|map(attribute='n')|list }} {{ items|rejectattr('n', 'equalto', 'a')|list|length }} {{ [0, 1, '', 'a']|select|list }}",
    "['a', 'c'] [1, 3] ['b', 'c'] 2 [1, 'a']" },
  { "filters-items",
    "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}|{% for k, v in nothing|items %}x{% endfor %}|{{ d.items()|list }}",
    "b=1;a=[1, 'x'];c=None;||[('b', 1), ('a', [1, 'x']), ('c', None)]" },
  { "filters-numbers",
    "{{ '42'|int + 1 }} {{ '2.5'|float }} {{ 'x'|int }} {{ 3.9|int }} {{ -3|abs }} {{ '7'|int(0) }} {{ 'q'|float(1.5) }}",
    "43 2.5 0 3 3 7 1.5" },
  { "tojson",
    "{{ d|tojson }} {{ d|tojson(sort_keys=true) }} {{ [1, 2.0, true, none, 'x']|tojson }} {{ 'café \"q\" \\\\ \\n\\t\001\177'|tojson }}",
    "{\"b\": 1, \"a\": [1, \"x\"], \"c\": null} {\"a\": [1, \"x\"], \"b\": 1, \"c\": null} [1, 2.0, true, null, \"x\"] \"café \\\"q\\\" \\\\ \\n\\t\\u0001\177\"" },
  { "tojson-indent",
    "{{ d|tojson(indent=2) }}\n{{ {'a': [], 'b': {}}|tojson(indent=1) }}\n{{ d|tojson(separators=(',', ':')) }}",
    "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    \"x\"\n  ],\n  \"c\": null\n}\n{\n \"a\": [],\n \"b\": {}\n}\n{\"b\":1,\"a\":[1,\"x\"],\"c\":null}" },
  { "tests",
    "{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is sequence }} {{ 1 is number }} {{ true is boolean }} {{ 1 is integer }} {{ 1.0 is float }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is in 'cat' }} {{ x is not defined }} {{ true is true }} {{ 1 is true }} {{ {} is sequence }} {{ nothing is iterable }} {{ none is iterable }} {{ s is lower }}",
    "False True True True True True True True True True True True True True True False True True False False" },
  { "string-methods",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'x<t>y</t>z'.split('</t>')[0].split('<t>')[-1] }} [{{ '\\n\\nx\\n'.lstrip('\\n') }}] {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x','c')) }} {{ 'aaa'.replace('a','b',2) }} [{{ ' x '.strip() }}] [{{ 'xy\\n\\n'.rstrip('\\n') }}] {{ 'a-b-c'.split('-', 1) }} {{ '-'.join(['a', 'b']) }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.count('bc') }}",
    "['a', 'b', '', 'c'] ['a', 'b'] y [x\n] True True bba [x] [xy] ['a', 'b-c'] a-b 2 2" },
  { "whitespace-dash",
    "a  {%- if true %} b {% endif -%}  c\n{{- ' d ' -}}\n  e",
    "a b c d e" },
  { "trim-blocks",
    "{% if true %}\nyes\n{% endif %}\nend\n{# comment #}\nafter",
    "yes\nend\nafter" },
  { "lstrip-blocks",
    "  {% if true %}\n    x\n  {% endif %}\n  {{ 'y' }}\n\t{% for i in [1] %}\n  z{{ i }}\n\t{% endfor %}\n",
    "    x\n  y\n  z1\n" },
  { "lstrip-plus",
    "  {%+ if true %}x{% endif %}\n  {% if true +%}\ny{% endif %}",
    "  x\ny" },
  { "loop-vars",
    "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}:{{ loop.previtem }}/{{ loop.nextitem }}|{% endfor %}",
    "10TrueFalse332:/b|21FalseFalse321:a/c|32FalseTrue310:b/|" },
  { "loop-else-filter",
    "{% for x in [] %}a{% else %}empty{% endfor %} {% for x in range(10) if x is odd %}{{ x }}{{ loop.index }},{% endfor %} {% for x in range(1, 10, 3) %}{{ x }}{% endfor %}",
    "empty 11,32,53,74,95, 147" },
  { "loop-control",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "0134" },
  { "loop-nested",
    "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "11x 21y 1|12x 22y 2|" },
  { "loop-dict-order",
    "{% for k in d %}{{ k }}{% endfor %} {% for k in {'z': 1, 'a': 2, 'm': 3} %}{{ k }}{% endfor %}",
    "bac zam" },
  { "scoping",
    "{% set y = 1 %}{% for x in [1] %}{% set y = 2 %}{{ y }}{% endfor %}{{ y }}{% if true %}{% set y = 3 %}{% endif %}{{ y }}",
    "213" },
  { "namespace",
    "{% set ns = namespace(c=0, seen=[]) %}{% for x in [1,2,3] %}{% set ns.c = ns.c + x %}{% endfor %}{{ ns.c }} {{ ns.seen }}",
    "6 []" },
  { "macros",
    "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(punct='.', name='Cy') }} [{{ greet() }}]",
    "Hello Bob! Hello Al? Hello Cy. [Hello !]" },
  { "macro-recursion",
    "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}",
    "54321" },
  { "macro-globals",
    "{% set g = 'top' %}{% macro m() %}{{ g }}{{ s }}{% endmacro %}{% for s in [1] %}{{ m() }}{% endfor %}",
    "topHello" },
  { "set-block",
    "{% set x %}in{{ 1 }}{% endset %}[{{ x }}] {% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = 1, 2 %}{{ t }}",
    "[in1] 12 (1, 2)" },
  { "repr",
    "{{ [\"a'b\", 'x\\ny', \"q\\\"\", '\\\\'] }} {{ {'k': none} }}",
    "[\"a'b\", 'x\\ny', 'q\"', '\\\\'] {'k': None}" },
  { "newlines",
    "a\015\nb\015{% if true %}\015\nc{% endif %}\n\n",
    "a\nb\nc" },
  { "compare-chain",
    "{{ 1 < 2 < 3 }} {{ 'b' > 'a' > 'c' }} {{ 1 < n <= 3 }} {{ 1 == 1 in [1] }}",
    "True False True True" },
  { "sort-cycle-repeat",
    "{{ ['b', 'A', 'c']|sort }} {{ items|sort(attribute='k', reverse=true)|map(attribute='n')|join }} {{ [1] * 3 }} {% for x in 'abc' %}{{ loop.cycle('x', 'y') }}{% endfor %} {{ items|map(attribute='zz')|list }}",
    "['A', 'b', 'c'] cba [1, 1, 1] xyx [Undefined, Undefined, Undefined]" },
  { "literals",
    "{{ 'a' 'b' }} {{ \"\\u00e9\\x41\" }} {{ 1_000 }} {{ [1, 2,] }} {{ {'a': 1,} }} {{ True }} {{ None }}",
    "ab éA 1000 [1, 2] {'a': 1} True None" },
};

static DcpJinjaValue *
parse_variables (const char *json)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, json, -1, &error);
  g_assert_no_error (error);
  return dcp_jinja_value_new_json (json_parser_get_root (parser));
}

static char *
render (const char *source, DcpJinjaValue *globals, GError **error)
{
  g_autoptr(DcpJinjaTemplate) tmpl = dcp_jinja_template_new (source, error);
  if (tmpl == NULL)
    return NULL;
  return dcp_jinja_template_render (tmpl, globals, error);
}

static void
test_render_case (gconstpointer data)
{
  const RenderCase *c = data;
  g_autoptr(DcpJinjaValue) globals = parse_variables (variables);
  g_autoptr(GError) error = NULL;
  g_autofree char *out = render (c->source, globals, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (out, ==, c->expected);
}

typedef struct {
  const char *name;
  const char *source;
  int code;
  const char *message;  /* a part of the error message */
} ErrorCase;

static const ErrorCase error_cases[] = {
  { "unterminated-print", "ab\n{{ x ", DCP_ERROR_CORRUPT_FILE, "line 2, column 6: unexpected end of template, expected '}}'" },
  { "unterminated-block", "{% if x %}a", DCP_ERROR_CORRUPT_FILE, "needs 'endif'" },
  { "unterminated-for", "{% for x in y %}a{% endif %}", DCP_ERROR_CORRUPT_FILE, "unexpected 'endif'" },
  { "unterminated-comment", "a {# b", DCP_ERROR_CORRUPT_FILE, "line 1, column 3: unterminated comment" },
  { "unterminated-string", "{{ 'abc }}", DCP_ERROR_CORRUPT_FILE, "unterminated string" },
  { "bad-expression", "{{ 1 + }}", DCP_ERROR_CORRUPT_FILE, "line 1, column 8: unexpected end of print statement" },
  { "bad-character", "{{ a $ b }}", DCP_ERROR_CORRUPT_FILE, "unexpected character '$'" },
  { "stray-end", "a{% endfor %}", DCP_ERROR_CORRUPT_FILE, "unexpected 'endfor'" },
  { "unknown-filter", "{{ x|frobnicate }}", DCP_ERROR_NOT_SUPPORTED, "no filter named 'frobnicate'" },
  { "unknown-test", "{{ x is frobnicated }}", DCP_ERROR_NOT_SUPPORTED, "no test named 'frobnicated'" },
  { "unknown-tag", "{% include 'other.jinja' %}", DCP_ERROR_NOT_SUPPORTED, "unsupported tag 'include'" },
  { "raise-exception", "a{{ raise_exception('Bad ' ~ n ~ ' input.') }}", DCP_ERROR_INVALID_ARGUMENT, "Bad 3 input." },
  { "undefined-call", "{{ nope() }}", DCP_ERROR_INVALID_ARGUMENT, "line 1: 'nope' is undefined" },
  { "undefined-attribute", "\n{{ d.zz.yy }}", DCP_ERROR_INVALID_ARGUMENT, "line 2: 'dict object' has no attribute 'zz'" },
  { "type-error", "{{ 'a' + n }}", DCP_ERROR_INVALID_ARGUMENT, "can only concatenate str (not \"int\") to str" },
  { "not-iterable", "{% for x in n %}{% endfor %}", DCP_ERROR_INVALID_ARGUMENT, "'int' object is not iterable" },
  { "items-of-string", "{{ s|items }}", DCP_ERROR_INVALID_ARGUMENT, "Can only get item pairs from a mapping." },
  { "tojson-undefined", "{{ nothing|tojson }}", DCP_ERROR_INVALID_ARGUMENT, "Object of type Undefined is not JSON serializable" },
  { "division-by-zero", "{{ n / 0 }}", DCP_ERROR_INVALID_ARGUMENT, "division by zero" },
  { "set-non-namespace", "{% set d.x = 1 %}", DCP_ERROR_INVALID_ARGUMENT, "non-namespace" },
  { "deep-recursion", "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", DCP_ERROR_TOO_LARGE, "runaway recursion in 'r'" },
  { "too-many-args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", DCP_ERROR_INVALID_ARGUMENT, "takes not more than 1 argument" },
  { "runaway-loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", DCP_ERROR_TOO_LARGE, "more than 1000000 loop iterations" },
  { "huge-range", "{% for i in range(1000000000) %}{% endfor %}", DCP_ERROR_TOO_LARGE, "range too big" },
};

static void
test_error_case (gconstpointer data)
{
  const ErrorCase *c = data;
  g_autoptr(DcpJinjaValue) globals = parse_variables (variables);
  g_autoptr(GError) error = NULL;
  g_autofree char *out = render (c->source, globals, &error);

  g_assert_null (out);
  g_assert_error (error, DCP_ERROR, c->code);
  if (strstr (error->message, c->message) == NULL)
    g_error ("%s: message \"%s\" lacks \"%s\"", c->name, error->message, c->message);
}

/* Nesting that would exhaust the stack of a recursive parser is refused. */
static void
test_deep_nesting (void)
{
  g_autoptr(GString) source = g_string_new ("{{ ");
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpJinjaTemplate) tmpl = NULL;

  for (int i = 0; i < 100000; i++)
    g_string_append (source, i % 2 ? "(" : "[");
  g_string_append (source, "1");
  for (int i = 100000 - 1; i >= 0; i--)
    g_string_append (source, i % 2 ? ")" : "]");
  g_string_append (source, " }}");
  tmpl = dcp_jinja_template_new (source->str, &error);
  g_assert_null (tmpl);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (error->message, "nested deeper than"));
  g_clear_error (&error);

  g_string_assign (source, "");
  for (int i = 0; i < 100000; i++)
    g_string_append (source, "{% if true %}");
  tmpl = dcp_jinja_template_new (source->str, &error);
  g_assert_null (tmpl);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_clear_error (&error);

  g_string_assign (source, "{{ ");
  for (int i = 0; i < 100; i++)
    g_string_append (source, "(-");
  g_string_append (source, "1");
  for (int i = 0; i < 100; i++)
    g_string_append (source, ")");
  g_string_append (source, " }}");
  tmpl = dcp_jinja_template_new (source->str, &error);
  g_assert_no_error (error);
}

static void
test_invalid_utf8 (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpJinjaTemplate) tmpl = dcp_jinja_template_new ("abc\xff{{ x }}", &error);

  g_assert_null (tmpl);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
}

/* Random strings (seeded) survive tojson (read back by json-glib) and split/join. */
static void
test_random_strings (void)
{
  static const gunichar pool[] = {
    'a', 'z', ' ', '\n', '\t', '\r', '"', '\'', '\\', '/', '<', '>', '{', '}', '%', '#', '-',
    0x01, 0x1f, 0x7f, 0xe9, 0xa0, 0x2028, 0x4e2d, 0x1f600,
  };
  g_autoptr(GRand) rng = g_rand_new_with_seed (20261202);
  g_autoptr(DcpJinjaTemplate) to_json = dcp_jinja_template_new ("{{ s|tojson }}", NULL);
  g_autoptr(DcpJinjaTemplate) round_trip =
    dcp_jinja_template_new ("{{ s.split('\\n')|join('\\n') }}", NULL);

  g_assert_nonnull (to_json);
  g_assert_nonnull (round_trip);
  for (int i = 0; i < 500; i++)
    {
      g_autoptr(GString) s = g_string_new (NULL);
      g_autoptr(DcpJinjaValue) globals = dcp_jinja_dict_new ();
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autofree char *json = NULL;
      g_autofree char *same = NULL;
      int len = g_rand_int_range (rng, 0, 40);

      for (int k = 0; k < len; k++)
        g_string_append_unichar (s, pool[g_rand_int_range (rng, 0, G_N_ELEMENTS (pool))]);
      dcp_jinja_dict_set (globals, "s", dcp_jinja_string_new (s->str));
      json = dcp_jinja_template_render (to_json, globals, &error);
      g_assert_no_error (error);
      json_parser_load_from_data (parser, json, -1, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (json_node_get_string (json_parser_get_root (parser)), ==, s->str);
      for (const char *p = json; *p; p++)
        g_assert_true ((guchar) *p >= 0x20);
      same = dcp_jinja_template_render (round_trip, globals, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (same, ==, s->str);
    }
}

static JsonNode *
json (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, text, -1, &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

/* The chat template API: variables as transformers passes them, one template rendered twice. */
static void
test_chat_template_api (void)
{
  static const char *const source =
    "{{ bos_token }}|{{ eos_token }}|{{ tools }}|{{ add_generation_prompt }}|"
    "{{ enable_thinking is defined }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpChatTemplate) tmpl = dcp_chat_template_new (source, &error);
  g_autoptr(JsonNode) messages = json ("[{\"role\": \"user\", \"content\": \"hi\"}]");
  g_autoptr(JsonNode) kwargs = json ("{\"enable_thinking\": false}");
  g_autoptr(JsonNode) bad_kwargs = json ("{\"messages\": []}");
  g_autoptr(JsonNode) tools = json ("[{\"name\": \"t\"}]");
  g_autofree char *first = NULL;
  g_autofree char *second = NULL;
  g_autofree char *refused = NULL;

  g_assert_no_error (error);
  first = dcp_chat_template_render (tmpl, messages, NULL, TRUE, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (first, ==, "||None|True|False|user:hi;");

  dcp_chat_template_set_bos_token (tmpl, "<s>");
  dcp_chat_template_set_eos_token (tmpl, "</s>");
  second = dcp_chat_template_render (tmpl, messages, tools, FALSE,
                                     json_node_get_object (kwargs), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (second, ==, "<s>|</s>|[{'name': 't'}]|False|True|user:hi;");

  refused = dcp_chat_template_render (tmpl, messages, NULL, FALSE,
                                      json_node_get_object (bad_kwargs), &error);
  g_assert_null (refused);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

/* The shipped Qwen3.5 template raises for a misplaced system message, with its own words. */
static void
test_chat_template_raise (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "chat-templates",
                                                 "qwen3.5.jinja", NULL);
  g_autofree char *source = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpChatTemplate) tmpl = NULL;
  g_autoptr(JsonNode) messages =
    json ("[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"b\"}]");
  g_autofree char *out = NULL;

  g_assert_true (g_file_get_contents (path, &source, NULL, &error));
  tmpl = dcp_chat_template_new (source, &error);
  g_assert_no_error (error);
  out = dcp_chat_template_render (tmpl, messages, NULL, TRUE, NULL, &error);
  g_assert_null (out);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "System message must be at the beginning.");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (render_cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/jinja/render/%s", render_cases[i].name);
      g_test_add_data_func (path, &render_cases[i], test_render_case);
    }
  for (guint i = 0; i < G_N_ELEMENTS (error_cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/jinja/error/%s", error_cases[i].name);
      g_test_add_data_func (path, &error_cases[i], test_error_case);
    }
  g_test_add_func ("/jinja/error/invalid-utf8", test_invalid_utf8);
  g_test_add_func ("/jinja/error/deep-nesting", test_deep_nesting);
  g_test_add_func ("/jinja/random-strings", test_random_strings);
  g_test_add_func ("/chat-template/api", test_chat_template_api);
  g_test_add_func ("/chat-template/raise", test_chat_template_raise);
  return g_test_run ();
}
