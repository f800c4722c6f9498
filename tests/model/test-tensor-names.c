/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "dcp-tensor-names.h"

static void
test_canonical (void)
{
  static const struct { const char *hf, *canonical; } cases[] = {
    { "model.language_model.layers.3.mlp.up_proj.weight", "layers.3.mlp.up_proj.weight" },
    { "model.layers.3.mlp.up_proj.weight", "layers.3.mlp.up_proj.weight" },
    { "model.language_model.embed_tokens.weight", "embed_tokens.weight" },
    { "model.norm.weight", "norm.weight" },
    { "model.visual.blocks.0.attn.qkv.weight", "visual.blocks.0.attn.qkv.weight" },
    { "mtp.fc.weight", "mtp.fc.weight" },
    { "lm_head.weight", "lm_head.weight" },
    { "vision_tower.x", NULL },
    { "model.", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *got = dcp_tensor_name_canonical (cases[i].hf);
      g_assert_cmpstr (got, ==, cases[i].canonical);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tensor-names/canonical", test_canonical);
  return g_test_run ();
}
