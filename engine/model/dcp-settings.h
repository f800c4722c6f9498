/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-memory-plan.h"

G_BEGIN_DECLS

/* The engine's settings: one table of keys (dcp-settings.c) that the command line, settings.json,
 * environment variables, the launcher's controls and its "Copy command line" all go through.
 * Precedence: defaults < settings.json < DECAPYBARA_* environment < command line. */

typedef enum { DCP_SETTING_BACKEND_CUDA, DCP_SETTING_BACKEND_CPU } DcpSettingBackend;
typedef enum { DCP_ACTIVATIONS_FP8, DCP_ACTIVATIONS_BF16 } DcpActivations;
typedef enum {
  DCP_SPECULATOR_OFF, DCP_SPECULATOR_MTP, DCP_SPECULATOR_NGRAM, DCP_SPECULATOR_DFLASH
} DcpSpeculator;
#define DCP_DRAFT_MAX 15        /* --draft-length */
#define DCP_DRAFT_DEFAULT 4     /* --draft-length when not given */
typedef enum {
  DCP_PREFILL_BALANCED, DCP_PREFILL_DECODE_PRIORITY, DCP_PREFILL_PREFILL_PRIORITY
} DcpPrefillPolicy;
typedef enum {
  DCP_SETTING_LOOP_GUARD_STOP, DCP_SETTING_LOOP_GUARD_END_THINKING, DCP_SETTING_LOOP_GUARD_ESCAPE, DCP_SETTING_LOOP_GUARD_OFF
} DcpSettingLoopGuard;
typedef enum { DCP_VISION_OFF, DCP_VISION_BF16, DCP_VISION_FP8 } DcpVision;
typedef enum { DCP_SETTING_OFF, DCP_SETTING_ON } DcpSettingSwitch;

#define DCP_SIZE_AUTO G_MAXUINT64   /* ram-cache, disk-cache: "auto" */

typedef struct {
  char *model;                   /* a model file, or a folder to pick one from */
  char *host;
  guint port;
  char *api_key;                 /* NULL: no authentication */
  guint http_max_connections;    /* client connections open at once */
  guint http_header_timeout;     /* seconds: a new connection's first request head */
  guint http_idle_timeout;       /* seconds: a kept-alive connection's next request head */
  guint http_body_timeout;       /* seconds: a request body, after its head */
  DcpSettingSwitch allow_image_urls; /* fetch images that requests give as http(s) URLs */
  guint image_url_timeout;           /* seconds: all of one request's image URLs */
  DcpContextMode context_mode;
  guint conversations;
  guint64 context_tokens;        /* 0 = auto */
  guint kv_bits_k, kv_bits_v;
  DcpRopeScaling rope_scaling;
  DcpActivations activations;
  DcpSpeculator speculator;
  guint draft_length;            /* 1..DCP_DRAFT_MAX; 0: chosen by confidence each step */
  char *drafter;                 /* a DFlash drafter file, for --speculator dflash; NULL: none */
  DcpPrefillPolicy prefill_policy;
  guint prefill_chunk;           /* prompt tokens per step */
  DcpSettingLoopGuard loop_guard;
  DcpVision vision;
  guint64 ram_cache_bytes;       /* DCP_SIZE_AUTO, or bytes */
  guint64 disk_cache_bytes;
  char *disk_cache_dir;          /* NULL: $XDG_CACHE_HOME/decapybara/states */
  guint64 keep_free_bytes;
  guint integrity_interval;      /* seconds per sweep of the weights; 0 = the check at start only */
  DcpSettingBackend backend;
} DcpSettings;

/* What a build and backend can do: a setting beyond it is refused with a message saying so. */
typedef struct {
  gboolean cuda;                 /* the CUDA backend is built and a GPU is present */
  gboolean kv_quantized;         /* KV bits below 16 */
  gboolean fp8_activations;
  gboolean speculators;          /* mtp / ngram drafting */
  gboolean dflash;               /* the DFlash block drafter (--speculator dflash --drafter FILE) */
  gboolean vision;
  gboolean tiers;                /* RAM and disk caches */
  gboolean rope_yarn;            /* rope scaling 1m */
} DcpEngineCaps;

typedef struct {
  const char *key;               /* "kv-bits": the option --kv-bits, the JSON key, DECAPYBARA_KV_BITS */
  const char *arg;               /* the value's shape for --help: "K/V" */
  const char *summary;           /* one line for --help */
  const char *explanation;       /* the launcher's "?" text: what it does, the choices compared */
} DcpSettingInfo;

void                   dcp_settings_init_default (DcpSettings *settings);
void                   dcp_settings_clear        (DcpSettings *settings);
/* dest (uninitialized or cleared) becomes a deep copy of src. */
void                   dcp_settings_copy         (DcpSettings       *dest,
                                                  const DcpSettings *src);
guint                  dcp_settings_count        (void);
const DcpSettingInfo  *dcp_settings_info         (guint index);
/* Parses one value for one key; the error names the key and says what is allowed. */
gboolean               dcp_settings_set          (DcpSettings *settings,
                                                  const char  *key,
                                                  const char  *value,
                                                  GError     **error);
/* The current value as the command line would write it (NULL when unset, e.g. no API key). */
char                  *dcp_settings_get          (const DcpSettings *settings,
                                                  const char        *key);
gboolean               dcp_settings_load_json    (DcpSettings *settings,
                                                  JsonNode    *root,
                                                  GError     **error);
gboolean               dcp_settings_load_file    (DcpSettings *settings,
                                                  const char  *path,
                                                  GError     **error);
/* Reads every DECAPYBARA_<KEY> variable of envp (g_get_environ () format). */
gboolean               dcp_settings_load_environ (DcpSettings *settings,
                                                  char       **envp,
                                                  GError     **error);
/* Settings that conflict, or that this engine cannot do yet: an error that says which and why. */
gboolean               dcp_settings_validate     (const DcpSettings   *settings,
                                                  const DcpEngineCaps *caps,
                                                  GError             **error);
/* The equivalent `decapybara ...` command line, options that differ from the defaults only;
 * the API key is left out unless include_secrets. */
char                  *dcp_settings_to_command_line (const DcpSettings *settings,
                                                     gboolean           include_secrets);
/* Every setting but the API key (and those unset), as a settings.json object of strings: what
 * --write-settings writes, the D-Bus Settings property, the launcher's saved settings. */
char                  *dcp_settings_to_json_data (const DcpSettings *settings);
void                   dcp_settings_to_plan      (const DcpSettings *settings,
                                                  DcpPlanSettings   *plan);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpSettings, dcp_settings_clear)

G_END_DECLS
