/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-costs"

#include "config.h"

#include <string.h>

#include "dcp-costs.h"
#include "dcp-error.h"

gboolean
dcp_device_report_parse (DcpDeviceReport *r, const char *json, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local = NULL;
  JsonObject *o;
  double measured;

  g_return_val_if_fail (r != NULL && json != NULL, FALSE);
  memset (r, 0, sizeof *r);
  if (!json_parser_load_from_data (parser, json, -1, &local) ||
      json_parser_get_root (parser) == NULL || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "the engine's GPU report is not a JSON object%s%s",
                   local ? ": " : "", local ? local->message : "");
      return FALSE;
    }
  o = json_node_get_object (json_parser_get_root (parser));
  r->available = json_object_get_boolean_member_with_default (o, "available", FALSE);
  if (!r->available)
    {
      r->reason = g_strdup (json_object_get_string_member_with_default (o, "reason", "no GPU was found"));
      return TRUE;
    }
  r->name = g_strdup (json_object_get_string_member_with_default (o, "name", "GPU"));
  r->total_bytes = MAX (0, json_object_get_int_member_with_default (o, "total_bytes", 0));
  r->free_bytes = MAX (0, json_object_get_int_member_with_default (o, "free_bytes", 0));
  measured = json_object_get_double_member_with_default (o, "measured_bandwidth_gbps", 0);
  r->bandwidth_measured = measured > 0;
  r->bandwidth_gbps = measured > 0 ? measured : json_object_get_double_member_with_default (o, "peak_bandwidth_gbps", 0);
  return TRUE;
}

void
dcp_device_report_clear (DcpDeviceReport *r)
{
  g_clear_pointer (&r->reason, g_free);
  g_clear_pointer (&r->name, g_free);
}

guint64
dcp_costs_step_bytes (const DcpMemoryPlan *p, guint conversations, guint64 context)
{
  /* The embedding is a gather of one row per token: small enough to leave out. The DeltaNet
   * state is read and written back every step. */
  guint64 weights = p->weights_text + p->weights_lm_head + p->weights_mtp;
  guint64 per_conversation = 2 * p->gdn_bytes_per_conversation + p->kv_bytes_per_token * context;

  return weights + (guint64) conversations * per_conversation;
}

void
dcp_costs_compute (DcpCosts *c, const DcpModelMeta *model, const DcpSettings *settings,
                   const DcpDeviceReport *device, guint64 plan_vram_bytes)
{
  dcp_costs_compute_with_drafter (c, model, settings, NULL, device, plan_vram_bytes);
}

void
dcp_costs_compute_with_drafter (DcpCosts *c, const DcpModelMeta *model, const DcpSettings *settings,
                                const DcpPlanDrafter *drafter, const DcpDeviceReport *device,
                                guint64 plan_vram_bytes)
{
  DcpPlanSettings ps;
  DcpPlanDevice pd = { 0 };
  g_autoptr(GError) error = NULL;
  double bytes_per_s;
  guint64 full;

  g_return_if_fail (c != NULL && settings != NULL);
  memset (c, 0, sizeof *c);
  c->have_model = model != NULL;
  c->have_device = device != NULL && device->available;
  c->cpu_backend = settings->backend == DCP_SETTING_BACKEND_CPU;
  c->conversations = settings->conversations;
  c->ram_cache_auto = settings->ram_cache_bytes == DCP_SIZE_AUTO;
  c->disk_cache_auto = settings->disk_cache_bytes == DCP_SIZE_AUTO && settings->context_mode == DCP_CONTEXT_POOL;
  if (model == NULL)
    return;

  dcp_settings_to_plan (settings, &ps);
  if (drafter != NULL)
    ps.drafter = *drafter;
  if (c->cpu_backend)
    dcp_plan_device_read_ram (&pd);
  else if (c->have_device)
    {
      pd.vram_total_bytes = device->total_bytes;
      pd.vram_free_bytes = device->free_bytes;
    }
  if (pd.vram_total_bytes == 0)
    pd.vram_total_bytes = pd.vram_free_bytes = plan_vram_bytes;
  c->free_bytes = pd.vram_free_bytes;
  c->plan_ok = dcp_memory_plan_compute (&c->plan, &model->plan, &ps, &pd, &error);
  if (!c->plan_ok)
    {
      c->plan_error = g_strdup (error->message);
      return;
    }
  c->have_accuracy = dcp_model_meta_get_accuracy (model, settings->kv_bits_k, settings->kv_bits_v, &c->accuracy);

  full = MAX (c->plan.context_per_conversation, DCP_COSTS_SHORT_CONTEXT);
  c->step_bytes_short = dcp_costs_step_bytes (&c->plan, 1, DCP_COSTS_SHORT_CONTEXT);
  c->step_bytes_full = dcp_costs_step_bytes (&c->plan, 1, full);
  if (!c->have_device || c->cpu_backend || device->bandwidth_gbps <= 0)
    return;
  bytes_per_s = device->bandwidth_gbps * 1e9;
  c->tokens_per_s_short = bytes_per_s / c->step_bytes_short;
  c->tokens_per_s_full = bytes_per_s / c->step_bytes_full;
  c->tokens_per_s_all = settings->conversations * bytes_per_s /
                        dcp_costs_step_bytes (&c->plan, settings->conversations, DCP_COSTS_SHORT_CONTEXT);
}

void
dcp_costs_clear (DcpCosts *c)
{
  g_clear_pointer (&c->plan_error, g_free);
}
