/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-settings"

#include "config.h"

#include <stddef.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-settings.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

typedef enum {
  KIND_STRING,     /* char * */
  KIND_UINT,       /* guint in [min, max] */
  KIND_TOKENS,     /* guint64: "auto" = 0, or a token count */
  KIND_CHOICE,     /* an enum stored as int: one of choices[] */
  KIND_KV,         /* kv_bits_k / kv_bits_v: "K/V" */
  KIND_CACHE,      /* guint64 bytes: "auto", "0", or GiB */
  KIND_GIB,        /* guint64 bytes given in GiB */
} Kind;

typedef struct {
  DcpSettingInfo info;
  Kind kind;
  gsize offset;
  guint min, max;                 /* KIND_UINT */
  const char *const *choices;     /* KIND_CHOICE, in enum order */
} Setting;

static const char *const context_modes[] = { "pool", "fixed", NULL };
static const char *const rope_modes[] = { "auto", "off", "1m", NULL };
static const char *const activation_modes[] = { "fp8", "bf16", NULL };
static const char *const speculators[] = { "off", "mtp", "ngram", "dflash", NULL };
static const char *const prefill_policies[] = { "balanced", "decode-priority", "prefill-priority", NULL };
static const char *const loop_guards[] = { "stop", "end-thinking", "escape", "off", NULL };
static const char *const vision_modes[] = { "off", "bf16", "fp8", NULL };
static const char *const backends[] = { "cuda", "cpu", NULL };
static const char *const switches[] = { "off", "on", NULL };

#define OFF(field) offsetof (DcpSettings, field)

static const Setting settings_table[] = {
  { { "model", "FILE", "Model file (.mcapy), or a folder to take the only one from",
      "The model to serve. A folder works when it holds exactly one .mcapy file." },
    KIND_STRING,
    OFF (model) },
  { { "host", "ADDRESS", "Address to listen on (default 127.0.0.1: this computer only)",
      "127.0.0.1 lets only programs on this computer connect. 0.0.0.0 opens the server to your "
      "network: set an API key first." },
    KIND_STRING,
    OFF (host) },
  { { "port", "PORT", "TCP port (default 8080; 0 picks a free one)",
      "The port clients connect to." },
    KIND_UINT,
    OFF (port),
    0,
    65535 },
  { { "api-key", "KEY", "Require this key from clients (Authorization: Bearer or x-api-key)",
      "With a key, every request but /health must carry it. Without one, anyone who can reach the "
      "address can use the server." },
    KIND_STRING,
    OFF (api_key) },
  { { "http-max-connections", "N", "Client connections open at once (default 512); more get 503",
      "Each connection costs a file descriptor. Past this many, a new connection is answered 503 "
      "with Retry-After at once and closed." },
    KIND_UINT,
    OFF (http_max_connections),
    1,
    1000000 },
  { { "http-header-timeout", "SECONDS",
      "Time a new connection has to send its request head (default 10)",
      "A connection that has not sent a complete request line and headers this long after it "
      "opened is closed." },
    KIND_UINT,
    OFF (http_header_timeout),
    1,
    86400 },
  { { "http-idle-timeout", "SECONDS",
      "Time a kept-alive connection may wait for its next request (default 30)",
      "After a response, the client has this long to send the whole head of its next request on "
      "the same connection; then the connection is closed." },
    KIND_UINT,
    OFF (http_idle_timeout),
    1,
    86400 },
  { { "http-body-timeout", "SECONDS", "Time a client has to send a request body (default 60)",
      "Counted from the end of the request head: a body that has not fully arrived by then is "
      "refused and the connection closed." },
    KIND_UINT,
    OFF (http_body_timeout),
    1,
    86400 },
  { { "allow-image-urls", "off|on", "Fetch images that requests give as http(s) URLs (default off)",
      "on lets every client make the server fetch any http or https address it names, including "
      "addresses on your own network that the client itself cannot reach. off accepts only images "
      "sent inside the request (base64)." },
    KIND_CHOICE,
    OFF (allow_image_urls),
    0,
    0,
    switches },
  { { "image-url-timeout", "SECONDS", "Time to fetch all of a request's image URLs (default 10)",
      "With allow-image-urls on: a request whose images have not all arrived by then is refused." },
    KIND_UINT,
    OFF (image_url_timeout),
    1,
    600 },
  { { "context-mode", "pool|fixed",
      "Share one context pool among conversations, or give each a fixed slot",
      "pool: every conversation may grow to the full context and idle ones hold nothing back; the "
      "best use of memory. fixed: each conversation gets its own slot of the same size; predictable." },
    KIND_CHOICE,
    OFF (context_mode),
    0,
    0,
    context_modes },
  { { "conversations", "N", "Conversations served at once (default 1)",
      "How many agents or chats generate at the same time. More conversations raise total speed but "
      "each needs its own 147 MiB of DeltaNet state and a share of the context." },
    KIND_UINT,
    OFF (conversations),
    1,
    64 },
  { { "context", "auto|TOKENS", "Context size: auto = the largest that fits",
      "In pool mode, the tokens of the shared pool; in fixed mode, each slot. auto takes what the "
      "GPU has left after the weights." },
    KIND_TOKENS,
    OFF (context_tokens) },
  { { "kv-bits", "K/V", "Bits per KV-cache value for keys/values: 16/16, 8/8, 6/6, 6/4 or 4/4",
      "Fewer bits fit a longer context in the same memory at a small cost in accuracy; keys are "
      "more sensitive than values, hence 6/4." },
    KIND_KV,
    0 },
  { { "rope-scaling", "auto|off|1m",
      "Position scaling: 1m = YaRN x4, one conversation up to 1M tokens",
      "The model reads 262,144 tokens natively. 1m stretches positions four times (YaRN) for "
      "contexts up to 1,048,576 tokens, at some cost on short ones; auto does so only when the "
      "context asked for is longer than the native one, off never." },
    KIND_CHOICE,
    OFF (rope_scaling),
    0,
    0,
    rope_modes },
  { { "activations", "fp8|bf16", "Precision of activations in matrix products",
      "fp8 reads prompts faster; bf16 is a little more accurate." },
    KIND_CHOICE,
    OFF (activations),
    0,
    0,
    activation_modes },
  { { "speculator", "off|mtp|ngram|dflash",
      "Draft tokens to verify in one step (speculative decoding)",
      "mtp: the model's own next-token head drafts; ngram: drafts copied from the conversation; "
      "dflash: a DFlash drafter (--drafter) drafts a block at once. Output is the same as without "
      "(sampled output too, drawn as without); speed rises when drafts are accepted. dflash is "
      "checked but not run yet (speculation stays off)." },
    KIND_CHOICE,
    OFF (speculator),
    0,
    0,
    speculators },
  { { "draft-length", "0..15",
      "Draft tokens per step (0 = chosen each step by the drafter's confidence)",
      "Longer drafts pay off when most are accepted (code, repeated text). 0 weighs each draft's "
      "chance against the measured cost of a longer step: more drafts when the GPU has room, "
      "fewer when many conversations write." },
    KIND_UINT,
    OFF (draft_length),
    0,
    DCP_DRAFT_MAX },
  { { "drafter", "FILE", "DFlash drafter file (.mcapy) for --speculator dflash",
      "A small model trained to draft for this one (decapybara-convert makes the file from its "
      "checkpoint). It must fit the model: same hidden size and vocabulary, taps within its layers." },
    KIND_STRING,
    OFF (drafter) },
  { { "prefill-policy", "balanced|decode-priority|prefill-priority",
      "How prompt reading shares the GPU with conversations that are writing",
      "balanced: while others write, steps that read a prompt take at most half of the time. "
      "decode-priority: at most a quarter; writers are slowed least. prefill-priority: every "
      "step reads; new prompts start answering soonest." },
    KIND_CHOICE,
    OFF (prefill_policy),
    0,
    0,
    prefill_policies },
  { { "prefill-chunk", "TOKENS", "Prompt tokens read per step (default 2048)",
      "Larger chunks read prompts faster and need more activation memory." },
    KIND_UINT,
    OFF (prefill_chunk),
    16,
    65536 },
  { { "loop-guard", "stop|end-thinking|escape|off", "What to do when the model repeats itself",
      "stop ends the answer; end-thinking closes the thinking and lets the model answer; escape bans "
      "the token that would continue the loop; off lets it run." },
    KIND_CHOICE,
    OFF (loop_guard),
    0,
    0,
    loop_guards },
  { { "vision", "off|bf16|fp8", "Load the vision tower for image input",
      "Images need the vision tower (about 0.9 GiB in bf16). off saves that memory." },
    KIND_CHOICE,
    OFF (vision),
    0,
    0,
    vision_modes },
  { { "ram-cache", "auto|GiB|0", "RAM for idle conversations' state (auto: half the free RAM)",
      "Idle conversations move from VRAM to RAM and come back in milliseconds instead of re-reading "
      "their prompt." },
    KIND_CACHE,
    OFF (ram_cache_bytes) },
  { { "disk-cache", "auto|GiB|0", "Disk for idle conversations' state (pool mode only)",
      "A slower tier below RAM: seconds to come back, still faster than re-reading a long prompt." },
    KIND_CACHE,
    OFF (disk_cache_bytes) },
  { { "disk-cache-dir", "FOLDER", "Folder of the disk cache (default ~/.cache/decapybara/states)",
      "Where idle conversations' state files go: a fast local disk. Each file is checksummed and "
      "checked when read back; the files go away when the engine stops." },
    KIND_STRING,
    OFF (disk_cache_dir) },
  { { "keep-free", "GiB", "VRAM to leave to the desktop and other programs (default 0.5)",
      "Memory the engine will not use, so the desktop and other programs keep working." },
    KIND_GIB,
    OFF (keep_free_bytes) },
  { { "integrity-interval", "SECONDS",
      "Re-check every weight against the model file once per this many seconds (0 = not while serving)",
      "While it serves, the engine checks the weights in GPU memory against the model file's checksums, "
      "a little between steps (under 1% of the time), and restores a damaged one from the file. Cards "
      "without ECC can flip a bit hours after loading; default: a full check every 600 seconds." },
    KIND_UINT,
    OFF (integrity_interval),
    0,
    7 * 24 * 3600 },
  { { "backend", "cuda|cpu", "Where the model runs (default cuda; cpu is slow, for testing)",
      "cuda runs on the NVIDIA GPU. cpu runs the plain reference code: correct but far slower." },
    KIND_CHOICE,
    OFF (backend),
    0,
    0,
    backends },
};

#define FIELD(s, setting, type) ((type *) ((char *) (s) + (setting)->offset))

void
dcp_settings_init_default (DcpSettings *s)
{
  memset (s, 0, sizeof *s);
  s->host = g_strdup ("127.0.0.1");
  s->port = 8080;
  s->http_max_connections = 512;
  s->http_header_timeout = 10;
  s->http_idle_timeout = 30;
  s->http_body_timeout = 60;
  s->allow_image_urls = DCP_SETTING_OFF;
  s->image_url_timeout = 10;
  s->context_mode = DCP_CONTEXT_POOL;
  s->conversations = 1;
  s->kv_bits_k = s->kv_bits_v = 16;
  s->rope_scaling = DCP_ROPE_SCALING_AUTO;
  s->activations = DCP_ACTIVATIONS_BF16;
  s->speculator = DCP_SPECULATOR_OFF;
  s->draft_length = DCP_DRAFT_DEFAULT;
  s->prefill_policy = DCP_PREFILL_BALANCED;
  s->prefill_chunk = 2048;
  s->integrity_interval = 600;
  s->loop_guard = DCP_SETTING_LOOP_GUARD_STOP;
  s->vision = DCP_VISION_OFF;
  s->ram_cache_bytes = 0;
  s->disk_cache_bytes = 0;
  s->keep_free_bytes = GIB / 2;
  s->backend = DCP_SETTING_BACKEND_CUDA;
}

void
dcp_settings_clear (DcpSettings *s)
{
  g_clear_pointer (&s->model, g_free);
  g_clear_pointer (&s->drafter, g_free);
  g_clear_pointer (&s->host, g_free);
  g_clear_pointer (&s->api_key, g_free);
  g_clear_pointer (&s->disk_cache_dir, g_free);
}

void
dcp_settings_copy (DcpSettings *dest, const DcpSettings *src)
{
  *dest = *src;
  dest->model = g_strdup (src->model);
  dest->drafter = g_strdup (src->drafter);
  dest->host = g_strdup (src->host);
  dest->api_key = g_strdup (src->api_key);
  dest->disk_cache_dir = g_strdup (src->disk_cache_dir);
}

guint
dcp_settings_count (void)
{
  return G_N_ELEMENTS (settings_table);
}

const DcpSettingInfo *
dcp_settings_info (guint index)
{
  g_return_val_if_fail (index < G_N_ELEMENTS (settings_table), NULL);
  return &settings_table[index].info;
}

static const Setting *
find (const char *key)
{
  for (guint i = 0; i < G_N_ELEMENTS (settings_table); i++)
    if (g_str_equal (settings_table[i].info.key, key))
      return &settings_table[i];
  return NULL;
}

static gboolean
bad_value (GError **error, const Setting *setting, const char *value)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
               "setting “%s”: “%s” is not valid (expected %s)", setting->info.key, value, setting->info.arg);
  return FALSE;
}

static gboolean
parse_uint64 (const char *value, guint64 max, guint64 *out)
{
  return g_ascii_string_to_unsigned (value, 10, 0, max, out, NULL);
}

static gboolean
parse_gib (const char *value, guint64 *bytes)
{
  char *end = NULL;
  double gib = g_ascii_strtod (value, &end);

  if (end == value || *end != '\0' || !(gib >= 0) || gib > 1 << 20)
    return FALSE;
  *bytes = (guint64) (gib * GIB);
  return TRUE;
}

gboolean
dcp_settings_set (DcpSettings *s, const char *key, const char *value, GError **error)
{
  const Setting *setting = find (key);
  guint64 n;

  g_return_val_if_fail (s != NULL && key != NULL && value != NULL, FALSE);

  if (setting == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "there is no setting “%s”", key);
      return FALSE;
    }
  switch (setting->kind)
    {
    case KIND_STRING:
      if (*value == '\0' && !g_str_equal (key, "api-key"))
        return bad_value (error, setting, value);
      g_free (*FIELD (s, setting, char *));
      *FIELD (s, setting, char *) = *value ? g_strdup (value) : NULL;
      return TRUE;
    case KIND_UINT:
      if (!parse_uint64 (value, G_MAXUINT, &n) || n < setting->min || n > setting->max)
        return bad_value (error, setting, value);
      *FIELD (s, setting, guint) = (guint) n;
      return TRUE;
    case KIND_TOKENS:
      if (g_str_equal (value, "auto"))
        n = 0;
      else if (!parse_uint64 (value, G_GUINT64_CONSTANT (1) << 32, &n) || n == 0)
        return bad_value (error, setting, value);
      *FIELD (s, setting, guint64) = n;
      return TRUE;
    case KIND_CHOICE:
      for (int i = 0; setting->choices[i]; i++)
        if (g_str_equal (value, setting->choices[i]) ||
            /* end_thinking as in MegaCapybara's settings files */
            (g_str_equal (setting->choices[i], "end-thinking") && g_str_equal (value, "end_thinking")))
          {
            *FIELD (s, setting, int) = i;
            return TRUE;
          }
      return bad_value (error, setting, value);
    case KIND_KV:
      {
        static const char *const modes[] = { "16/16", "8/8", "6/6", "6/4", "4/4" };
        for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
          if (g_str_equal (value, modes[i]))
            {
              s->kv_bits_k = (guint) g_ascii_strtoull (value, NULL, 10);
              s->kv_bits_v = (guint) g_ascii_strtoull (strchr (value, '/') + 1, NULL, 10);
              return TRUE;
            }
        return bad_value (error, setting, value);
      }
    case KIND_CACHE:
      if (g_str_equal (value, "auto"))
        n = DCP_SIZE_AUTO;
      else if (!parse_gib (value, &n))
        return bad_value (error, setting, value);
      *FIELD (s, setting, guint64) = n;
      return TRUE;
    case KIND_GIB:
      if (!parse_gib (value, &n))
        return bad_value (error, setting, value);
      *FIELD (s, setting, guint64) = n;
      return TRUE;
    }
  g_assert_not_reached ();
}

static char *
format_gib (guint64 bytes)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  return g_strdup (g_ascii_formatd (buf, sizeof buf, "%g", bytes / (double) GIB));
}

char *
dcp_settings_get (const DcpSettings *s, const char *key)
{
  const Setting *setting = find (key);

  g_return_val_if_fail (setting != NULL, NULL);
  switch (setting->kind)
    {
    case KIND_STRING:
      return g_strdup (*FIELD (s, setting, char *));
    case KIND_UINT:
      return g_strdup_printf ("%u", *FIELD (s, setting, guint));
    case KIND_TOKENS:
      {
        guint64 n = *FIELD (s, setting, guint64);
        return n ? g_strdup_printf ("%" G_GUINT64_FORMAT, n) : g_strdup ("auto");
      }
    case KIND_CHOICE:
      return g_strdup (setting->choices[*FIELD (s, setting, int)]);
    case KIND_KV:
      return g_strdup_printf ("%u/%u", s->kv_bits_k, s->kv_bits_v);
    case KIND_CACHE:
      if (*FIELD (s, setting, guint64) == DCP_SIZE_AUTO)
        return g_strdup ("auto");
      return format_gib (*FIELD (s, setting, guint64));
    case KIND_GIB:
      return format_gib (*FIELD (s, setting, guint64));
    }
  g_assert_not_reached ();
}

gboolean
dcp_settings_load_json (DcpSettings *s, JsonNode *root, GError **error)
{
  JsonObjectIter iter;
  const char *key;
  JsonNode *node;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "settings must be a JSON object");
      return FALSE;
    }
  json_object_iter_init (&iter, json_node_get_object (root));
  while (json_object_iter_next (&iter, &key, &node))
    {
      GType type = json_node_get_value_type (node);
      g_autofree char *value = NULL;

      /* Numbers and booleans are accepted as they would be written on the command line. */
      if (type == G_TYPE_STRING)
        value = g_strdup (json_node_get_string (node));
      else if (type == G_TYPE_INT64)
        value = g_strdup_printf ("%" G_GINT64_FORMAT, json_node_get_int (node));
      else if (type == G_TYPE_DOUBLE)
        {
          char buf[G_ASCII_DTOSTR_BUF_SIZE];
          value = g_strdup (g_ascii_dtostr (buf, sizeof buf, json_node_get_double (node)));
        }
      else
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "setting “%s”: must be a string or a number", key);
          return FALSE;
        }
      if (!dcp_settings_set (s, key, value, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
dcp_settings_load_file (DcpSettings *s, const char *path, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local = NULL;

  if (!json_parser_load_from_file (parser, path, &local) ||
      !dcp_settings_load_json (s, json_parser_get_root (parser), &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: %s", path, local->message);
      return FALSE;
    }
  return TRUE;
}

gboolean
dcp_settings_load_environ (DcpSettings *s, char **envp, GError **error)
{
  for (guint i = 0; i < G_N_ELEMENTS (settings_table); i++)
    {
      g_autofree char *name = g_ascii_strup (settings_table[i].info.key, -1);
      g_autofree char *var = NULL;
      const char *value;

      g_strdelimit (name, "-", '_');
      var = g_strconcat ("DECAPYBARA_", name, NULL);
      value = g_environ_getenv (envp, var);
      if (value == NULL)
        continue;
      if (!dcp_settings_set (s, settings_table[i].info.key, value, error))
        {
          g_prefix_error (error, "%s: ", var);
          return FALSE;
        }
    }
  return TRUE;
}

static gboolean
refuse (GError **error, const char *what)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s is not implemented yet in this engine", what);
  return FALSE;
}

gboolean
dcp_settings_validate (const DcpSettings *s, const DcpEngineCaps *caps, GError **error)
{
  if (s->backend == DCP_SETTING_BACKEND_CUDA && !caps->cuda)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "backend “cuda” needs a build with CUDA and an NVIDIA GPU; use --backend cpu");
      return FALSE;
    }
  if (s->context_mode == DCP_CONTEXT_FIXED && s->disk_cache_bytes != 0)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "the disk cache needs --context-mode pool");
      return FALSE;
    }
  if ((s->kv_bits_k != 16 || s->kv_bits_v != 16) && !caps->kv_quantized)
    return refuse (error, "a quantized KV cache (--kv-bits below 16/16)");
  if (s->activations == DCP_ACTIVATIONS_FP8 && !caps->fp8_activations)
    return refuse (error, "--activations fp8");
  if (s->speculator == DCP_SPECULATOR_DFLASH && s->drafter == NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "--speculator dflash needs --drafter FILE: a DFlash drafter file "
                           "(decapybara-convert makes one from the drafter's checkpoint)");
      return FALSE;
    }
  if (s->drafter != NULL && s->speculator != DCP_SPECULATOR_DFLASH)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "--drafter is read only with --speculator dflash");
      return FALSE;
    }
  if (s->speculator == DCP_SPECULATOR_DFLASH && !caps->dflash)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "--speculator dflash: this backend has no DFlash drafter (use mtp or "
                           "ngram, or another backend)");
      return FALSE;
    }
  if (s->speculator != DCP_SPECULATOR_OFF && !caps->speculators)
    return refuse (error, "speculative decoding (--speculator)");
  if (s->vision != DCP_VISION_OFF && !caps->vision)
    return refuse (error, "the vision tower (--vision)");
  if ((s->ram_cache_bytes != 0 || s->disk_cache_bytes != 0) && !caps->tiers)
    return refuse (error, "the RAM and disk caches (--ram-cache, --disk-cache)");
  if (s->rope_scaling == DCP_ROPE_SCALING_1M && !caps->rope_yarn)
    return refuse (error, "YaRN rope scaling (--rope-scaling 1m)");
  return TRUE;
}

char *
dcp_settings_to_command_line (const DcpSettings *s, gboolean include_secrets)
{
  g_auto(DcpSettings) defaults = { 0 };
  GString *line = g_string_new ("decapybara");

  dcp_settings_init_default (&defaults);
  for (guint i = 0; i < G_N_ELEMENTS (settings_table); i++)
    {
      const char *key = settings_table[i].info.key;
      g_autofree char *value = dcp_settings_get (s, key);
      g_autofree char *def = dcp_settings_get (&defaults, key);
      g_autofree char *quoted = NULL;

      if (value == NULL || g_strcmp0 (value, def) == 0)
        continue;
      if (g_str_equal (key, "api-key") && !include_secrets)
        continue;
      quoted = g_shell_quote (value);
      g_string_append_printf (line, " --%s %s", key, quoted);
    }
  return g_string_free (line, FALSE);
}

char *
dcp_settings_to_json_data (const DcpSettings *settings)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  g_return_val_if_fail (settings != NULL, NULL);
  json_builder_begin_object (b);
  for (guint i = 0; i < dcp_settings_count (); i++)
    {
      const char *key = dcp_settings_info (i)->key;
      g_autofree char *value = dcp_settings_get (settings, key);

      if (value == NULL || g_str_equal (key, "api-key"))
        continue;
      json_builder_set_member_name (b, key);
      json_builder_add_string_value (b, value);
    }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  return json_to_string (root, FALSE);
}

void
dcp_settings_to_plan (const DcpSettings *s, DcpPlanSettings *plan)
{
  dcp_plan_settings_init_default (plan);
  plan->context_mode = s->context_mode;
  plan->conversations = s->conversations;
  plan->context_tokens = s->context_tokens;
  plan->kv_bits_k = s->kv_bits_k;
  plan->kv_bits_v = s->kv_bits_v;
  plan->rope_scaling = s->rope_scaling;
  plan->speculator_mtp = s->speculator == DCP_SPECULATOR_MTP;
  plan->vision = s->vision != DCP_VISION_OFF;
  plan->keep_free_bytes = s->keep_free_bytes;
  /* "auto" caches are sized by the engine at start from the machine's free RAM and disk. */
  plan->ram_cache_bytes = s->ram_cache_bytes == DCP_SIZE_AUTO ? 0 : s->ram_cache_bytes;
  plan->disk_cache_bytes = s->disk_cache_bytes == DCP_SIZE_AUTO ? 0 : s->disk_cache_bytes;
  /* How the backend stores state (docs/MEMORY.md): both keep the GDN conv state in FP32; the CPU
   * backend also its KV, and it has no CUDA runtime. The launcher's costs and the engine's
   * allocation both come from here. */
  plan->gdn_conv_value_bytes = DCP_PLAN_CPU_VALUE_BYTES;
  if (s->backend == DCP_SETTING_BACKEND_CPU)
    {
      plan->kv_value_bytes = DCP_PLAN_CPU_VALUE_BYTES;
      plan->cpu_backend = TRUE;
    }
}
