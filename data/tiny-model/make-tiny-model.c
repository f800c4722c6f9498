/* SPDX-License-Identifier: MIT */
/*
 * make-tiny-model OUTDIR: writes the embedded default model's checkpoint, a Hugging Face folder
 * (config.json, generation_config.json, model.safetensors) in the real qwen3_5 layout, with
 * Qwen3's vocabulary size so that the real Qwen3 tokenizer fits, the 27B's per-head dimensions,
 * an MTP head, and seeded random weights drawn like tests/models/make-test-models.py draws them.
 * The build converts it to data/tiny-model/tiny.mcapy with decapybara-convert. It answers with
 * random text, fast, on any CPU: it exists so that the server runs end to end without a download.
 *
 * make-tiny-model --vision OUTDIR: the same with a small vision tower (2 blocks, width 32, the
 * real patch size and 2x2 merge), the token ids of Qwen3's tokenizer for the image markers and
 * a preprocessor_config.json that keeps images between 4,096 and 65,536 pixels: images end to end
 * (data/tiny-model/vision/tiny-vision.mcapy).
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dcp-float16.h"

#define VOCAB 151936          /* Qwen3's embedding rows: every id of its tokenizer fits */
#define HIDDEN 64
#define INTER 192
#define LAYERS 4              /* 3 Gated DeltaNet + 1 gated attention */
#define HEADS 2
#define KV_HEADS 1
#define HEAD_DIM 256
#define LIN_K_HEADS 2
#define LIN_V_HEADS 6
#define LIN_DIM 128
#define CONV 4
#define EOS 151645            /* <|im_end|> */

typedef struct {
  char *name;
  guint ndim;
  guint64 shape[5];
  guint16 *data;              /* BF16 */
  guint64 n;
} Tensor;

static GPtrArray *tensors;
static GRand *rng;

static double
normal (void)
{
  double u = g_rand_double (rng), v = g_rand_double (rng);
  return sqrt (-2.0 * log (1.0 - u)) * cos (2.0 * G_PI * v);
}

/* kind: 'w' weight (fan-in scaled), 'z' zero-centred norm, 'o' plain norm around 1,
 * 'a' A_log, 'd' dt_bias, 'c' conv, 'b' a bias, 'p' a position table */
static void
add_nd (const char *name, char kind, guint ndim, const guint64 *shape)
{
  Tensor *t = g_new0 (Tensor, 1);
  double fan_in = 1.0;

  t->name = g_strdup (name);
  t->ndim = ndim;
  t->n = 1;
  for (guint d = 0; d < ndim; d++)
    {
      t->shape[d] = shape[d];
      t->n *= shape[d];
      if (d > 0)
        fan_in *= shape[d];
    }
  t->data = g_new (guint16, t->n);
  for (guint64 i = 0; i < t->n; i++)
    {
      double v;
      switch (kind)
        {
        case 'z': v = 0.2 * normal (); break;
        case 'o': v = 1.0 + 0.2 * normal (); break;
        case 'a': v = log (0.5 + 7.5 * g_rand_double (rng)); break;
        case 'd': v = 0.5 * normal (); break;
        case 'c': v = 0.4 * normal (); break;
        case 'b':
          v = 0.1 * normal ();
          break;
        case 'p':
          v = 0.5 * normal ();
          break;
        default:  v = normal () / sqrt (fan_in); break;
        }
      t->data[i] = dcp_f32_to_bf16 ((float) v);
    }
  g_ptr_array_add (tensors, t);
}

static void
add (const char *name, char kind, guint ndim, guint64 d0, guint64 d1, guint64 d2)
{
  const guint64 shape[3] = { d0, d1, d2 };

  add_nd (name, kind, ndim, shape);
}

static void
add_attention (const char *prefix)
{
  g_autofree char *q = g_strconcat (prefix, "self_attn.q_proj.weight", NULL);
  g_autofree char *k = g_strconcat (prefix, "self_attn.k_proj.weight", NULL);
  g_autofree char *v = g_strconcat (prefix, "self_attn.v_proj.weight", NULL);
  g_autofree char *o = g_strconcat (prefix, "self_attn.o_proj.weight", NULL);
  g_autofree char *qn = g_strconcat (prefix, "self_attn.q_norm.weight", NULL);
  g_autofree char *kn = g_strconcat (prefix, "self_attn.k_norm.weight", NULL);

  add (q, 'w', 2, 2 * HEADS * HEAD_DIM, HIDDEN, 0);
  add (k, 'w', 2, KV_HEADS * HEAD_DIM, HIDDEN, 0);
  add (v, 'w', 2, KV_HEADS * HEAD_DIM, HIDDEN, 0);
  add (o, 'w', 2, HIDDEN, HEADS * HEAD_DIM, 0);
  add (qn, 'z', 1, HEAD_DIM, 0, 0);
  add (kn, 'z', 1, HEAD_DIM, 0, 0);
}

static void
add_mlp_and_norms (const char *prefix)
{
  const char *parts[] = { "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                          "input_layernorm.weight", "post_attention_layernorm.weight" };
  g_autofree char *gate = g_strconcat (prefix, parts[0], NULL);
  g_autofree char *up = g_strconcat (prefix, parts[1], NULL);
  g_autofree char *down = g_strconcat (prefix, parts[2], NULL);
  g_autofree char *in = g_strconcat (prefix, parts[3], NULL);
  g_autofree char *post = g_strconcat (prefix, parts[4], NULL);

  add (gate, 'w', 2, INTER, HIDDEN, 0);
  add (up, 'w', 2, INTER, HIDDEN, 0);
  add (down, 'w', 2, HIDDEN, INTER, 0);
  add (in, 'z', 1, HIDDEN, 0, 0);
  add (post, 'z', 1, HIDDEN, 0, 0);
}

static void
add_gdn (const char *prefix)
{
  guint conv_dim = 2 * LIN_K_HEADS * LIN_DIM + LIN_V_HEADS * LIN_DIM;
  static const struct { const char *name; char kind; guint ndim; guint64 d0, d1, d2; } parts[] = {
    { "linear_attn.in_proj_qkv.weight", 'w', 2, 2 * LIN_K_HEADS * LIN_DIM + LIN_V_HEADS * LIN_DIM, HIDDEN, 0 },
    { "linear_attn.in_proj_z.weight", 'w', 2, LIN_V_HEADS * LIN_DIM, HIDDEN, 0 },
    { "linear_attn.in_proj_b.weight", 'w', 2, LIN_V_HEADS, HIDDEN, 0 },
    { "linear_attn.in_proj_a.weight", 'w', 2, LIN_V_HEADS, HIDDEN, 0 },
    { "linear_attn.conv1d.weight", 'c', 3, 0, 1, CONV },
    { "linear_attn.A_log", 'a', 1, LIN_V_HEADS, 0, 0 },
    { "linear_attn.dt_bias", 'd', 1, LIN_V_HEADS, 0, 0 },
    { "linear_attn.norm.weight", 'o', 1, LIN_DIM, 0, 0 },
    { "linear_attn.out_proj.weight", 'w', 2, HIDDEN, LIN_V_HEADS * LIN_DIM, 0 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    {
      g_autofree char *name = g_strconcat (prefix, parts[i].name, NULL);
      add (name, parts[i].kind, parts[i].ndim, parts[i].d0 ? parts[i].d0 : conv_dim, parts[i].d1, parts[i].d2);
    }
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(Tensor *const *) a)->name, (*(Tensor *const *) b)->name);
}

static gboolean
write_safetensors (const char *path, GError **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *header = NULL;
  g_autoptr(GByteArray) out = g_byte_array_new ();
  guint64 offset = 0, len;
  gsize header_len;

  g_ptr_array_sort (tensors, compare_names);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "__metadata__");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, "pt");
  json_builder_end_object (b);
  for (guint i = 0; i < tensors->len; i++)
    {
      Tensor *t = tensors->pdata[i];
      json_builder_set_member_name (b, t->name);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, "BF16");
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < t->ndim; d++)
        json_builder_add_int_value (b, (gint64) t->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "data_offsets");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, (gint64) offset);
      json_builder_add_int_value (b, (gint64) (offset + 2 * t->n));
      json_builder_end_array (b);
      json_builder_end_object (b);
      offset += 2 * t->n;
    }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  header = json_generator_to_data (gen, &header_len);

  len = GUINT64_TO_LE ((guint64) header_len);
  g_byte_array_append (out, (const guint8 *) &len, 8);
  g_byte_array_append (out, (const guint8 *) header, header_len);
  for (guint i = 0; i < tensors->len; i++)
    {
      Tensor *t = tensors->pdata[i];
      for (guint64 j = 0; j < t->n; j++)
        t->data[j] = GUINT16_TO_LE (t->data[j]);
      g_byte_array_append (out, (const guint8 *) t->data, 2 * t->n);
    }
  return g_file_set_contents (path, (const char *) out->data, out->len, error);
}

static const char config_json[] =
  "{\n"
  "  \"architectures\": [\"Qwen3_5ForConditionalGeneration\"],\n"
  "  \"model_type\": \"qwen3_5\",\n"
  "  \"tie_word_embeddings\": false,\n"
  "  \"text_config\": {\n"
  "    \"model_type\": \"qwen3_5_text\", \"vocab_size\": 151936, \"hidden_size\": 64,\n"
  "    \"intermediate_size\": 192, \"num_hidden_layers\": 4, \"full_attention_interval\": 4,\n"
  "    \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 256,\n"
  "    \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 6, \"linear_key_head_dim\": 128,\n"
  "    \"linear_value_head_dim\": 128, \"linear_conv_kernel_dim\": 4, \"hidden_act\": \"silu\",\n"
  "    \"rms_norm_eps\": 1e-06, \"max_position_embeddings\": 32768, \"mtp_num_hidden_layers\": 1,\n"
  "    \"attn_output_gate\": true, \"tie_word_embeddings\": false,\n"
  "    \"bos_token_id\": 151643, \"eos_token_id\": 151645,\n"
  "    \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0,\n"
  "      \"partial_rotary_factor\": 0.25, \"mrope_section\": [11, 11, 10], \"mrope_interleaved\": true}\n"
  "  }\n"
  "}\n";

/* The vision tower's part of config.json and its image processor (--vision). */
#define V_HIDDEN 32
#define V_INTER 64
#define V_DEPTH 2
#define V_POS 36 /* a 6 x 6 position table */

static const char vision_config_json[] =
    "  \"image_token_id\": 151655, \"video_token_id\": 151656,\n"
    "  \"vision_start_token_id\": 151652, \"vision_end_token_id\": 151653,\n"
    "  \"vision_config\": {\n"
    "    \"model_type\": \"qwen3_5_vision\", \"depth\": 2, \"hidden_size\": 32, \"num_heads\": 2,\n"
    "    \"intermediate_size\": 64, \"hidden_act\": \"gelu_pytorch_tanh\", \"in_channels\": 3,\n"
    "    \"patch_size\": 16, \"temporal_patch_size\": 2, \"spatial_merge_size\": 2,\n"
    "    \"num_position_embeddings\": 36, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": [],\n"
    "    \"rope_parameters\": {\"rope_type\": \"axial\", \"rope_theta\": 10000.0}\n"
    "  },\n";

static const char preprocessor_config_json[] =
    "{\n  \"image_processor_type\": \"Qwen2VLImageProcessor\", \"patch_size\": 16,\n"
    "  \"temporal_patch_size\": 2, \"merge_size\": 2,\n"
    "  \"size\": {\"shortest_edge\": 4096, \"longest_edge\": 65536},\n"
    "  \"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5]\n}\n";

static void
add_vision (void)
{
  const guint64 patch[5] = { V_HIDDEN, 3, 2, 16, 16 };
  const guint64 merged = 4 * V_HIDDEN;

  add_nd ("model.visual.patch_embed.proj.weight", 'w', 5, patch);
  add ("model.visual.patch_embed.proj.bias", 'b', 1, V_HIDDEN, 0, 0);
  add ("model.visual.pos_embed.weight", 'p', 2, V_POS, V_HIDDEN, 0);
  for (guint i = 0; i < V_DEPTH; i++)
    {
      static const struct {
        const char *name;
        char kind;
        guint ndim;
        guint64 d0, d1;
      } parts[] = {
        { "norm1.weight", 'o', 1, V_HIDDEN, 0 },
        { "norm1.bias", 'b', 1, V_HIDDEN, 0 },
        { "norm2.weight", 'o', 1, V_HIDDEN, 0 },
        { "norm2.bias", 'b', 1, V_HIDDEN, 0 },
        { "attn.qkv.weight", 'w', 2, 3 * V_HIDDEN, V_HIDDEN },
        { "attn.qkv.bias", 'b', 1, 3 * V_HIDDEN, 0 },
        { "attn.proj.weight", 'w', 2, V_HIDDEN, V_HIDDEN },
        { "attn.proj.bias", 'b', 1, V_HIDDEN, 0 },
        { "mlp.linear_fc1.weight", 'w', 2, V_INTER, V_HIDDEN },
        { "mlp.linear_fc1.bias", 'b', 1, V_INTER, 0 },
        { "mlp.linear_fc2.weight", 'w', 2, V_HIDDEN, V_INTER },
        { "mlp.linear_fc2.bias", 'b', 1, V_HIDDEN, 0 },
      };

      for (guint j = 0; j < G_N_ELEMENTS (parts); j++)
        {
          g_autofree char *name = g_strdup_printf ("model.visual.blocks.%u.%s", i, parts[j].name);
          add (name, parts[j].kind, parts[j].ndim, parts[j].d0, parts[j].d1, 0);
        }
    }
  add ("model.visual.merger.norm.weight", 'o', 1, V_HIDDEN, 0, 0);
  add ("model.visual.merger.norm.bias", 'b', 1, V_HIDDEN, 0, 0);
  add ("model.visual.merger.linear_fc1.weight", 'w', 2, merged, merged, 0);
  add ("model.visual.merger.linear_fc1.bias", 'b', 1, merged, 0, 0);
  add ("model.visual.merger.linear_fc2.weight", 'w', 2, HIDDEN, merged, 0);
  add ("model.visual.merger.linear_fc2.bias", 'b', 1, HIDDEN, 0, 0);
}

static const char generation_config_json[] =
  "{\n  \"eos_token_id\": [151645, 151643],\n  \"pad_token_id\": 151643,\n  \"do_sample\": true,\n"
  "  \"temperature\": 0.7,\n  \"top_k\": 20,\n  \"top_p\": 0.8\n}\n";

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *st = NULL, *cfg = NULL, *gen = NULL, *config = NULL;
  gboolean vision = argc == 3 && g_str_equal (argv[1], "--vision");
  const char *outdir = argv[argc - 1];

  if (argc != 2 && !vision)
    {
      fprintf (stderr, "usage: make-tiny-model [--vision] OUTDIR\n");
      return 2;
    }
  tensors = g_ptr_array_new ();
  rng = g_rand_new_with_seed (20261202);

  add ("model.language_model.embed_tokens.weight", 'w', 2, VOCAB, HIDDEN, 0);
  add ("lm_head.weight", 'w', 2, VOCAB, HIDDEN, 0);
  add ("model.language_model.norm.weight", 'z', 1, HIDDEN, 0, 0);
  for (guint l = 0; l < LAYERS; l++)
    {
      g_autofree char *prefix = g_strdup_printf ("model.language_model.layers.%u.", l);
      if ((l + 1) % 4 == 0)
        add_attention (prefix);
      else
        add_gdn (prefix);
      add_mlp_and_norms (prefix);
    }
  add ("mtp.pre_fc_norm_embedding.weight", 'z', 1, HIDDEN, 0, 0);
  add ("mtp.pre_fc_norm_hidden.weight", 'z', 1, HIDDEN, 0, 0);
  add ("mtp.fc.weight", 'w', 2, HIDDEN, 2 * HIDDEN, 0);
  add ("mtp.norm.weight", 'z', 1, HIDDEN, 0, 0);
  add_attention ("mtp.layers.0.");
  add_mlp_and_norms ("mtp.layers.0.");
  if (vision)
    add_vision ();
  /* The vision parts go after the text config's opening brace. */
  config = vision ? g_strconcat ("{\n", vision_config_json, config_json + 2, NULL)
                  : g_strdup (config_json);

  if (g_mkdir_with_parents (outdir, 0755) != 0)
    {
      fprintf (stderr, "make-tiny-model: cannot create %s\n", outdir);
      return 1;
    }
  st = g_build_filename (outdir, "model.safetensors", NULL);
  cfg = g_build_filename (outdir, "config.json", NULL);
  gen = g_build_filename (outdir, "generation_config.json", NULL);
  if (vision)
    {
      g_autofree char *pre = g_build_filename (outdir, "preprocessor_config.json", NULL);

      if (!g_file_set_contents (pre, preprocessor_config_json, -1, &error))
        {
          fprintf (stderr, "make-tiny-model: %s\n", error->message);
          return 1;
        }
    }
  if (!write_safetensors (st, &error) || !g_file_set_contents (cfg, config, -1, &error) ||
      !g_file_set_contents (gen, generation_config_json, -1, &error))
    {
      fprintf (stderr, "make-tiny-model: %s\n", error->message);
      return 1;
    }
  return 0;
}
