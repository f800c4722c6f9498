/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-speculation-costs"

#include "config.h"

#include <string.h>

#include "dcp-speculation-costs.h"

DcpSpeculator
dcp_speculation_resolve (const DcpSettings *settings, const DcpModelMeta *model,
                         const DcpDrafterInfo *drafter, gboolean *fell_back)
{
  gboolean has_head =
      model == NULL || (model->plan.config.mtp_n_layers > 0 && model->plan.mtp_bytes > 0);
  DcpSpeculator s;

  g_return_val_if_fail (settings != NULL, DCP_SPECULATOR_OFF);
  if (fell_back)
    *fell_back = FALSE;
  if (settings->speculator != DCP_SPECULATOR_MTP && settings->speculator != DCP_SPECULATOR_DFLASH)
    return settings->speculator;
  s = drafter != NULL ? DCP_SPECULATOR_DFLASH : has_head ? DCP_SPECULATOR_MTP : DCP_SPECULATOR_OFF;
  if (fell_back)
    *fell_back = s == DCP_SPECULATOR_OFF ||
                 (settings->speculator == DCP_SPECULATOR_DFLASH && s != DCP_SPECULATOR_DFLASH);
  return s;
}

char *
dcp_speculation_name (DcpSpeculator speculator)
{
  g_auto(DcpSettings) s = { 0 };

  dcp_settings_init_default (&s);
  s.speculator = speculator;
  return dcp_settings_get (&s, "speculator");
}

double
dcp_speculation_verify_factor (guint rows)
{
  static const struct {
    guint rows;
    double factor;
  } measured[] = { { 1, 1.0 }, { 2, 1.81 }, { 4, 1.82 }, { 9, 2.15 }, { 16, 2.19 } };

  if (rows <= 1)
    return 1.0;
  for (guint i = 1; i < G_N_ELEMENTS (measured); i++)
    if (rows <= measured[i].rows)
      {
        double t = (double) (rows - measured[i - 1].rows) / (measured[i].rows - measured[i - 1].rows);

        return measured[i - 1].factor + t * (measured[i].factor - measured[i - 1].factor);
      }
  return measured[G_N_ELEMENTS (measured) - 1].factor;
}

double
dcp_speculation_expected (double rate, guint drafts)
{
  double sum = 0, term = 1;

  for (guint i = 0; i < drafts; i++)
    {
      term *= rate;
      sum += term;
    }
  return sum;
}

double
dcp_speculation_rate_for (double accepted, guint drafts)
{
  double lo = 0, hi = 1;

  if (drafts == 0 || accepted <= 0)
    return 0;
  if (accepted >= drafts)
    return 1;
  /* The sum grows with the rate: bisection to well below what the panel shows. */
  for (guint i = 0; i < 60; i++)
    {
      double mid = (lo + hi) / 2;

      if (dcp_speculation_expected (mid, drafts) < accepted)
        lo = mid;
      else
        hi = mid;
    }
  return (lo + hi) / 2;
}

/* settings with another speculator: a copy through settings JSON (the API key, which costs
 * nothing, is not copied). */
static void
settings_variant (const DcpSettings *settings, DcpSpeculator speculator, DcpSettings *out)
{
  g_autofree char *json = dcp_settings_to_json_data (settings);
  g_autoptr(JsonNode) root = json_from_string (json, NULL);

  dcp_settings_init_default (out);
  if (root == NULL || !dcp_settings_load_json (out, root, NULL))
    g_return_if_reached ();
  out->speculator = speculator;
}

gboolean
dcp_speculation_costs_compute (DcpSpeculationCosts *out, const DcpModelMeta *model,
                               const DcpSettings *settings, const DcpDrafterInfo *drafter,
                               const DcpDeviceReport *device, guint64 plan_vram_bytes)
{
  g_auto(DcpSettings) off = { 0 }, with = { 0 };
  g_auto(DcpCosts) c_off = { 0 }, c_spec = { 0 };
  double bytes_per_s;
  guint64 drafting;

  g_return_val_if_fail (out != NULL && settings != NULL, FALSE);
  memset (out, 0, sizeof *out);
  out->speculator = dcp_speculation_resolve (settings, model, drafter, &out->fell_back);
  if (out->speculator != DCP_SPECULATOR_DFLASH)
    drafter = NULL;
  settings_variant (settings, DCP_SPECULATOR_OFF, &off);
  dcp_costs_compute (&c_off, model, &off, device, plan_vram_bytes);
  if (!c_off.plan_ok)
    return FALSE;
  out->tokens_per_s_without = c_off.tokens_per_s_short;
  out->vram_budget = c_off.plan.vram_budget;
  out->step_bytes = c_off.step_bytes_short;

  if (drafter != NULL)
    {
      DcpPlanDrafter plan_drafter;
      double accepted;

      /* The engine's plan with the drafter in it: its weights and step buffers beside the
       * model's, its context beside the model's KV for every token of the pool, which shrinks
       * by it (dcp_memory_plan_compute). */
      dcp_drafter_info_plan (drafter, &plan_drafter);
      settings_variant (settings, DCP_SPECULATOR_OFF, &with);
      dcp_costs_compute_with_drafter (&c_spec, model, &with, &plan_drafter, device,
                                      plan_vram_bytes);
      out->drafter_weight_bytes = plan_drafter.weight_bytes;
      out->drafter_kv_bytes = c_spec.plan.drafter_context;
      out->chosen = settings->draft_length == 0;
      out->drafts = out->chosen ? drafter->block_size - 1
                                : MIN (settings->draft_length, drafter->block_size - 1);
      out->measured = drafter->have_acceptance;
      accepted =
          drafter->have_acceptance ? drafter->mean_accepted : DCP_SPECULATION_DFLASH_ACCEPTED;
      /* Chosen by confidence, a step verifies the drafts likely to be accepted, however many:
       * the drafter's mean as it is. A fixed length: the mean's per-draft rate over it. */
      out->expected_accepted =
          out->chosen
              ? MIN (accepted, out->drafts)
              : dcp_speculation_expected (
                    dcp_speculation_rate_for (
                        accepted, drafter->have_acceptance ? drafter->acceptance_block - 1 : 15),
                    out->drafts);
      drafting = plan_drafter.weight_bytes + plan_drafter.bytes_per_token * DCP_COSTS_SHORT_CONTEXT;
    }
  else
    {
      settings_variant (settings, out->speculator, &with);
      dcp_costs_compute (&c_spec, model, &with, device, plan_vram_bytes);
      out->drafts = out->speculator == DCP_SPECULATOR_OFF ? 0
                    : settings->draft_length == 0         ? DCP_DRAFT_DEFAULT
                                                          : settings->draft_length;
      out->expected_accepted = dcp_speculation_expected (out->speculator == DCP_SPECULATOR_MTP
                                                             ? DCP_SPECULATION_RATE_MTP
                                                             : DCP_SPECULATION_RATE_NGRAM,
                                                         out->drafts);
      /* The MTP head is read once per chained draft; prompt lookup reads nothing. */
      drafting = out->speculator == DCP_SPECULATOR_MTP ? out->drafts * c_spec.plan.weights_mtp : 0;
    }
  if (!c_spec.plan_ok)
    {
      out->fits = FALSE;
      out->vram_total = c_off.plan.vram_total + out->drafter_weight_bytes + out->drafter_kv_bytes;
      return TRUE;
    }
  out->vram_total = c_spec.plan.vram_total;
  out->fits = c_spec.plan.fits;
  out->context_per_conversation = c_spec.plan.context_per_conversation;
  /* step_bytes counts the MTP head once when the plan holds it: replaced by what drafting reads. */
  out->verify_bytes = c_spec.step_bytes_short - c_spec.plan.weights_mtp + drafting;
  if (out->speculator == DCP_SPECULATOR_OFF)
    {
      out->verify_bytes = out->step_bytes;
      out->expected_accepted = 0;
    }
  if (c_off.tokens_per_s_short > 0)
    {
      bytes_per_s = c_off.tokens_per_s_short * c_off.step_bytes_short;
      out->tokens_per_s_with = (1 + out->expected_accepted) * bytes_per_s / out->verify_bytes /
                               dcp_speculation_verify_factor (1 + out->drafts);
    }
  return TRUE;
}
