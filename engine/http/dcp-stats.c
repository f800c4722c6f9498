/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-stats"

#include "config.h"

#include "dcp-stats.h"

/* Upper bounds (seconds) of the histogram buckets; +Inf is implied. */
static const double ttft_bounds[] = { 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120 };
static const double gap_bounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 1 };

typedef struct {
  const double *bounds;
  guint         n_bounds;
  guint64       counts[16];   /* per bucket, not cumulative; [n_bounds] is +Inf */
  guint64       count;
  double        sum;
} Histogram;

struct _DcpStats {
  gint64     started_us;
  GHashTable *http;           /* "route\tstatus" -> guint64 count (boxed in a pointer) */
  guint64    generations_started;
  guint64    generations_finished[DCP_FINISH_CANCELLED + 1];
  guint64    generation_errors;
  guint64    prompt_tokens;
  guint64    cached_prompt_tokens;
  guint64    completion_tokens;
  guint64    reasoning_tokens;
  Histogram  ttft;
  Histogram  gap;
  JsonNode  *(*extra) (gpointer);
  gpointer   extra_data;
  DcpIntegrityMonitor *integrity;
};

static void
histogram_init (Histogram *h, const double *bounds, guint n_bounds)
{
  g_assert (n_bounds < G_N_ELEMENTS (h->counts));
  h->bounds = bounds;
  h->n_bounds = n_bounds;
}

static void
histogram_observe (Histogram *h, double value)
{
  guint i = 0;

  while (i < h->n_bounds && value > h->bounds[i])
    i++;
  h->counts[i]++;
  h->count++;
  h->sum += value;
}

DcpStats *
dcp_stats_new (void)
{
  DcpStats *self = g_new0 (DcpStats, 1);

  self->started_us = g_get_monotonic_time ();
  self->http = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  histogram_init (&self->ttft, ttft_bounds, G_N_ELEMENTS (ttft_bounds));
  histogram_init (&self->gap, gap_bounds, G_N_ELEMENTS (gap_bounds));
  return self;
}

void
dcp_stats_free (DcpStats *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->http);
  g_free (self);
}

void
dcp_stats_http_request (DcpStats *self, const char *route, guint status)
{
  g_autofree char *key = g_strdup_printf ("%s\t%u", route, status);
  guint64 *count = g_hash_table_lookup (self->http, key);

  if (count == NULL)
    {
      count = g_new0 (guint64, 1);
      g_hash_table_insert (self->http, g_steal_pointer (&key), count);
    }
  (*count)++;
}

void
dcp_stats_generation_start (DcpStats *self)
{
  self->generations_started++;
}

void
dcp_stats_first_token (DcpStats *self, double seconds)
{
  histogram_observe (&self->ttft, seconds);
}

void
dcp_stats_token_gap (DcpStats *self, double seconds)
{
  histogram_observe (&self->gap, seconds);
}

void
dcp_stats_generation_end (DcpStats *self, DcpFinishReason reason, const DcpUsage *usage)
{
  self->generations_finished[reason]++;
  self->prompt_tokens += usage->prompt_tokens;
  self->cached_prompt_tokens += usage->cached_prompt_tokens;
  self->completion_tokens += usage->completion_tokens;
  self->reasoning_tokens += usage->reasoning_tokens;
}

void
dcp_stats_generation_error (DcpStats *self)
{
  self->generation_errors++;
}

static void
add_int (JsonBuilder *b, const char *name, gint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, value);
}

static void
add_histogram_json (JsonBuilder *b, const char *name, const Histogram *h)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_object (b);
  add_int (b, "count", h->count);
  json_builder_set_member_name (b, "mean_seconds");
  json_builder_add_double_value (b, h->count ? h->sum / h->count : 0);
  json_builder_end_object (b);
}

JsonNode *
dcp_stats_to_json (DcpStats *self, guint waiting, guint running)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  GHashTableIter iter;
  gpointer key, value;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "uptime_seconds");
  json_builder_add_double_value (b, (g_get_monotonic_time () - self->started_us) / 1e6);
  add_int (b, "requests_waiting", waiting);
  add_int (b, "requests_running", running);
  add_int (b, "generations_started", self->generations_started);
  json_builder_set_member_name (b, "generations_finished");
  json_builder_begin_object (b);
  for (int r = 0; r <= DCP_FINISH_CANCELLED; r++)
    add_int (b, dcp_finish_reason_to_string (r), self->generations_finished[r]);
  add_int (b, "error", self->generation_errors);
  json_builder_end_object (b);
  add_int (b, "prompt_tokens", self->prompt_tokens);
  add_int (b, "prompt_tokens_reused", self->cached_prompt_tokens);
  add_int (b, "completion_tokens", self->completion_tokens);
  add_int (b, "reasoning_tokens", self->reasoning_tokens);
  add_histogram_json (b, "time_to_first_token", &self->ttft);
  add_histogram_json (b, "time_per_output_token", &self->gap);
  json_builder_set_member_name (b, "http_requests");
  json_builder_begin_object (b);
  g_hash_table_iter_init (&iter, self->http);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      g_autofree char *name = g_strdelimit (g_strdup (key), "\t", ' ');
      add_int (b, name, *(guint64 *) value);
    }
  json_builder_end_object (b);
  if (self->integrity != NULL)
    {
      g_autoptr(JsonNode) integrity = dcp_integrity_monitor_to_json (self->integrity);

      json_builder_set_member_name (b, "integrity");
      json_builder_add_value (b, json_node_copy (json_object_get_member (json_node_get_object (integrity),
                                                                         "integrity")));
    }
  if (self->extra != NULL)
    {
      g_autoptr(JsonNode) extra = self->extra (self->extra_data);
      JsonObjectIter members;
      const char *name;
      JsonNode *member;

      json_object_iter_init (&members, json_node_get_object (extra));
      while (json_object_iter_next (&members, &name, &member))
        {
          json_builder_set_member_name (b, name);
          json_builder_add_value (b, json_node_copy (member));
        }
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

void
dcp_stats_set_extra (DcpStats *self, JsonNode *(*func) (gpointer), gpointer data)
{
  g_return_if_fail (self != NULL);
  self->extra = func;
  self->extra_data = data;
}

void
dcp_stats_set_integrity (DcpStats *self, DcpIntegrityMonitor *monitor)
{
  g_return_if_fail (self != NULL);
  self->integrity = monitor;
}

static void
add_histogram_text (GString *out, const char *name, const char *help, const Histogram *h)
{
  guint64 cumulative = 0;
  char number[G_ASCII_DTOSTR_BUF_SIZE];

  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  for (guint i = 0; i < h->n_bounds; i++)
    {
      cumulative += h->counts[i];
      g_string_append_printf (out, "%s_bucket{le=\"%s\"} %" G_GUINT64_FORMAT "\n", name,
                              g_ascii_dtostr (number, sizeof number, h->bounds[i]), cumulative);
    }
  cumulative += h->counts[h->n_bounds];
  g_string_append_printf (out, "%s_bucket{le=\"+Inf\"} %" G_GUINT64_FORMAT "\n", name, cumulative);
  g_string_append_printf (out, "%s_sum %s\n", name, g_ascii_dtostr (number, sizeof number, h->sum));
  g_string_append_printf (out, "%s_count %" G_GUINT64_FORMAT "\n", name, h->count);
}

static void
add_counter (GString *out, const char *name, const char *help, const char *type, guint64 value)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n%s %" G_GUINT64_FORMAT "\n",
                          name, help, name, type, name, value);
}

/* The batching scheduler's speculation counters, from its part of /stats. */
static void
add_speculation (GString *out, JsonNode *extra)
{
  g_autoptr(JsonNode) node = extra;
  JsonObject *root = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  JsonObject *sched = root != NULL && json_object_has_member (root, "scheduler")
                          ? json_object_get_object_member (root, "scheduler")
                          : NULL;

  if (sched == NULL)
    return;
  add_counter (out, "decapybara_verify_steps_total",
               "Speculative decoding: a conversation's token and drafts verified in one step.",
               "counter",
               (guint64) json_object_get_int_member_with_default (sched, "verify_steps", 0));
  add_counter (out, "decapybara_drafted_tokens_total", "Draft tokens verified.", "counter",
               (guint64) json_object_get_int_member_with_default (sched, "drafted_tokens", 0));
  add_counter (out, "decapybara_accepted_tokens_total",
               "Draft tokens accepted (each saves a step).", "counter",
               (guint64) json_object_get_int_member_with_default (sched, "accepted_tokens", 0));
}

char *
dcp_stats_to_prometheus (DcpStats *self, guint waiting, guint running)
{
  GString *out = g_string_new (NULL);
  g_autoptr(GList) keys = g_list_sort (g_hash_table_get_keys (self->http), (GCompareFunc) g_strcmp0);

  g_string_append (out, "# HELP decapybara_http_requests_total HTTP requests answered, by route and status.\n"
                        "# TYPE decapybara_http_requests_total counter\n");
  for (GList *l = keys; l != NULL; l = l->next)
    {
      g_auto(GStrv) parts = g_strsplit (l->data, "\t", 2);

      g_string_append_printf (out, "decapybara_http_requests_total{route=\"%s\",status=\"%s\"} %" G_GUINT64_FORMAT "\n",
                              parts[0], parts[1], *(guint64 *) g_hash_table_lookup (self->http, l->data));
    }
  g_string_append (out, "# HELP decapybara_generations_total Generations ended, by finish reason.\n"
                        "# TYPE decapybara_generations_total counter\n");
  for (int r = 0; r <= DCP_FINISH_CANCELLED; r++)
    g_string_append_printf (out, "decapybara_generations_total{reason=\"%s\"} %" G_GUINT64_FORMAT "\n",
                            dcp_finish_reason_to_string (r), self->generations_finished[r]);
  g_string_append_printf (out, "decapybara_generations_total{reason=\"error\"} %" G_GUINT64_FORMAT "\n",
                          self->generation_errors);
  add_counter (out, "decapybara_prompt_tokens_total", "Prompt tokens of finished generations.", "counter",
               self->prompt_tokens);
  add_counter (out, "decapybara_prompt_tokens_reused_total", "Prompt tokens taken from a cached prefix.",
               "counter", self->cached_prompt_tokens);
  add_counter (out, "decapybara_generated_tokens_total", "Output tokens (reasoning included).", "counter",
               self->completion_tokens);
  add_counter (out, "decapybara_reasoning_tokens_total", "Reasoning tokens.", "counter", self->reasoning_tokens);
  add_counter (out, "decapybara_queue_length", "Requests waiting for the engine.", "gauge", waiting);
  add_counter (out, "decapybara_requests_running", "Requests the engine is running.", "gauge", running);
  if (self->extra != NULL)
    add_speculation (out, self->extra (self->extra_data));
  add_histogram_text (out, "decapybara_time_to_first_token_seconds",
                      "From the request's arrival to its first output token.", &self->ttft);
  add_histogram_text (out, "decapybara_time_per_output_token_seconds",
                      "Time between consecutive output tokens of a request.", &self->gap);
  if (self->integrity != NULL)
    {
      DcpIntegrityStats st;

      dcp_integrity_monitor_get_stats (self->integrity, &st);
      add_counter (out, "decapybara_integrity_sweeps_total",
                   "Full sweeps of the weights against the model file's checksums.", "counter", st.sweeps);
      add_counter (out, "decapybara_integrity_bytes_checked_total", "Weight bytes checked while serving.",
                   "counter", st.bytes_checked);
      add_counter (out, "decapybara_integrity_mismatches_total",
                   "Weight tensors found not to match the model file (damaged in memory).", "counter",
                   st.mismatches);
      add_counter (out, "decapybara_integrity_healed_total",
                   "Damaged weight tensors restored from the model file and checked again.", "counter",
                   st.healed);
      add_counter (out, "decapybara_integrity_heal_failures_total",
                   "Damaged weight tensors that could not be restored.", "counter", st.heal_failures);
      g_string_append_printf (out, "# HELP decapybara_integrity_check_seconds_total Time spent checking "
                                   "and restoring weights.\n# TYPE decapybara_integrity_check_seconds_total "
                                   "counter\ndecapybara_integrity_check_seconds_total %.6f\n",
                              st.check_us / 1e6);
    }
  if (self->extra != NULL)
    {
      /* The batching scheduler's numbers, as /stats names them (counters and gauges mixed). */
      g_autoptr(JsonNode) extra = self->extra (self->extra_data);
      JsonObject *scheduler = json_object_get_object_member (json_node_get_object (extra), "scheduler");
      JsonObjectIter members;
      const char *name;
      JsonNode *member;

      json_object_iter_init (&members, scheduler);
      while (json_object_iter_next (&members, &name, &member))
        {
          g_autofree char *metric = g_strconcat ("decapybara_scheduler_", name, NULL);
          g_autofree char *help = g_strdup_printf ("The batching scheduler's %s (GET /stats).", name);

          add_counter (out, metric, help, "untyped", (guint64) json_node_get_int (member));
        }
    }
  return g_string_free (out, FALSE);
}
