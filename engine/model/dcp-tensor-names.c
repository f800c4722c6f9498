/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tensor-names"

#include "config.h"

#include <string.h>

#include "dcp-tensor-names.h"

char *
dcp_tensor_name_canonical (const char *hf_name)
{
  static const struct { const char *prefix, *replacement; } rules[] = {
    { "model.language_model.", "" },
    { "model.visual.", "visual." },
    { "model.", "" },              /* text-only checkpoints */
    { "mtp.", "mtp." },
    { "lm_head.", "lm_head." },
  };

  g_return_val_if_fail (hf_name != NULL, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (rules); i++)
    if (g_str_has_prefix (hf_name, rules[i].prefix) && hf_name[strlen (rules[i].prefix)] != '\0')
      return g_strconcat (rules[i].replacement, hf_name + strlen (rules[i].prefix), NULL);
  return NULL;
}
