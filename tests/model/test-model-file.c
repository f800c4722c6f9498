/* SPDX-License-Identifier: MIT */
/* The .mcapy reader and writer: a round trip of a small file, reading the head from a buffer,
 * versioning, and a corpus of damaged files made from the valid one (truncations, every header
 * field, index entries, overlaps, overflows, shapes against the config, bad UTF-8 and JSON,
 * random byte flips): each must fail with an error naming the file and the field, never crash. */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-checksum.h"
#include "dcp-error.h"
#include "dcp-model-file.h"
#include "dcp-model-writer.h"
#include "dcp-quant.h"

typedef struct {
  const char *name;
  DcpDType dtype;
  guint ndim;
  guint64 shape[3];
} Spec;

/* Tensors of the real-heads config (hidden 128, MLP 384), in several formats. */
static const Spec specs[] = {
  { "norm.weight", DCP_DTYPE_BF16, 1, { 128 } },
  { "layers.0.mlp.gate_proj.weight", DCP_DTYPE_MXFP4_E2M1, 2, { 384, 128 } },
  { "layers.0.mlp.down_proj.weight", DCP_DTYPE_MXFP6_E2M3, 2, { 128, 384 } },
  { "layers.0.linear_attn.A_log", DCP_DTYPE_F32, 1, { 6 } },
  { "layers.0.linear_attn.conv1d.weight", DCP_DTYPE_BF16, 3, { 1280, 1, 4 } },
  { "layers.3.self_attn.k_proj.weight", DCP_DTYPE_MXFP8_E4M3, 2, { 256, 128 } },
  { "visual.blocks.0.attn.qkv.weight", DCP_DTYPE_BF16, 2, { 96, 40 } },
};

typedef struct {
  char *dir;
  char *path;
  GBytes *valid;             /* the valid file's bytes */
  GPtrArray *data;           /* GBytes per spec: what was written */
  JsonNode *metadata;
} Fixture;

static JsonNode *
make_metadata (void)
{
  g_autofree char *config_path = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", "config.json", NULL);
  g_autofree char *config = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (config_path, &config, NULL, &error);
  g_assert_no_error (error);
  text = g_strdup_printf ("{\"architecture\": \"qwen3_5\", \"config\": %s, \"chat_template\": \"{{ messages }} \\u00e9\", "
                          "\"tokenizer_config\": {\"eos_token\": \"<|im_end|>\"}, \"generation\": {\"temperature\": 0.6}, "
                          "\"recipe\": {\"name\": \"test\"}, \"sizes\": {\"text\": 1}, "
                          "\"source\": {\"model_id\": \"test/model\", \"revision\": null, \"files\": []}, \"accuracy\": null}",
                          config);
  return json_from_string (text, &error);
}

static void
fixture_set_up (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelWriter) w = NULL;
  static const char tokenizer_json[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}";
  g_autoptr(GBytes) tokenizer = g_bytes_new_static (tokenizer_json, strlen (tokenizer_json));
  g_autofree char *contents = NULL;
  gsize len = 0;
  GRand *rand = g_rand_new_with_seed (20261202);

  f->dir = g_dir_make_tmp ("dcp-model-file-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "small.mcapy", NULL);
  f->data = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  f->metadata = make_metadata ();
  g_assert_nonnull (f->metadata);

  w = dcp_model_writer_new (f->path, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    g_assert_cmpint (dcp_model_writer_add_tensor (w, specs[i].name, specs[i].dtype, specs[i].shape, specs[i].ndim, &error), ==, i);
  g_assert_true (dcp_model_writer_begin (w, tokenizer, 65536, &error));
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      guint64 n = dcp_model_writer_get_tensor_bytes (w, i), cut;
      guint8 *bytes = g_malloc (n);

      if (dcp_dtype_is_block (specs[i].dtype))
        {
          g_autofree float *src = g_new (float, specs[i].shape[0] * specs[i].shape[1]);
          for (guint64 k = 0; k < specs[i].shape[0] * specs[i].shape[1]; k++)
            src[k] = (float) g_rand_double_range (rand, -2, 2);
          dcp_quantize (specs[i].dtype, src, specs[i].shape[0], specs[i].shape[1], bytes);
        }
      else
        for (guint64 k = 0; k < n; k++)
          bytes[k] = g_rand_int (rand);
      /* Two pieces, the second first: order must not matter. */
      cut = n / 16 * 8;
      g_assert_true (dcp_model_writer_write (w, i, cut, bytes + cut, n - cut, &error));
      g_assert_true (dcp_model_writer_write (w, i, 0, bytes, cut, &error));
      g_assert_no_error (error);
      g_ptr_array_add (f->data, g_bytes_new_take (bytes, n));
    }
  g_assert_true (dcp_model_writer_finish (w, f->metadata, &error));
  g_assert_no_error (error);
  g_file_get_contents (f->path, &contents, &len, &error);
  g_assert_no_error (error);
  f->valid = g_bytes_new_take (g_steal_pointer (&contents), len);
  g_rand_free (rand);
}

static void
fixture_tear_down (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  g_autoptr(GDir) dir = g_dir_open (f->dir, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *p = g_build_filename (f->dir, name, NULL);
      g_unlink (p);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_free (f->path);
  g_bytes_unref (f->valid);
  g_ptr_array_unref (f->data);
  json_node_unref (f->metadata);
}

static void
test_round_trip (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = dcp_model_file_open (f->path, &error);
  g_autoptr(JsonNode) metadata = json_node_new (JSON_NODE_OBJECT);
  DcpModelFileIter iter;
  const DcpTensorView *t;
  guint n = 0;

  g_assert_no_error (error);
  g_assert_cmpuint (dcp_model_file_get_n_tensors (file), ==, G_N_ELEMENTS (specs));
  json_node_set_object (metadata, dcp_model_file_get_metadata (file));
  g_assert_true (json_node_equal (metadata, f->metadata));
  g_assert_cmpuint (dcp_model_file_get_config (file)->hidden_size, ==, 128);
  g_assert_cmpuint (dcp_model_file_get_config (file)->n_layers, ==, 4);
  g_assert_nonnull (dcp_model_file_get_tokenizer (file));
  g_assert_true (json_object_has_member (dcp_model_file_get_tokenizer (file), "model"));

  dcp_model_file_iter_init (&iter, file);
  while (dcp_model_file_iter_next (&iter, &t))
    {
      GBytes *want = f->data->pdata[n];
      g_assert_cmpstr (t->name, ==, specs[n].name);
      g_assert_true (t == dcp_model_file_lookup (file, specs[n].name));
      g_assert_cmpint (t->dtype, ==, specs[n].dtype);
      g_assert_cmpuint (t->ndim, ==, specs[n].ndim);
      g_assert_cmpmem (t->shape, t->ndim * 8, specs[n].shape, specs[n].ndim * 8);
      g_assert_cmpmem (t->data, t->nbytes, g_bytes_get_data (want, NULL), g_bytes_get_size (want));
      g_assert_cmpuint ((guintptr) t->data % 4096, ==, 0);   /* the mapping is page-aligned */
      g_assert_cmpuint (dcp_model_file_get_checksum (file, t), ==, dcp_checksum64 (t->data, t->nbytes));
      if (dcp_dtype_is_block (t->dtype))
        g_assert_cmpuint (t->nbytes, ==, dcp_quant_tensor_bytes (t->dtype, t->shape[0], t->shape[1]));
      n++;
    }
  g_assert_cmpuint (n, ==, G_N_ELEMENTS (specs));
  g_assert_null (dcp_model_file_lookup (file, "layers.9.mlp.up_proj.weight"));
  g_assert_true (dcp_model_file_verify (file, &error));
  g_assert_no_error (error);
}

/* The launcher's path: the head of a file from a prefix of its bytes. */
static void
test_parse_head (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  gsize len = 0;
  const guint8 *bytes = g_bytes_get_data (f->valid, &len);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelInfo) info = NULL;
  guint64 needed = 0, end;

  g_assert_null (dcp_model_info_parse (bytes, 0, "x.mcapy", &needed, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (needed, ==, DCP_MODEL_HEADER_SIZE);
  g_assert_null (dcp_model_info_parse (bytes, 100, "x.mcapy", &needed, &error));
  g_assert_cmpuint (needed, ==, DCP_MODEL_HEADER_SIZE);
  g_assert_null (dcp_model_info_parse (bytes, DCP_MODEL_HEADER_SIZE, "x.mcapy", &needed, &error));
  g_assert_no_error (error);
  end = needed;
  g_assert_cmpuint (end, >, DCP_MODEL_HEADER_SIZE);
  g_assert_cmpuint (end, <, 64 * 1024);
  g_assert_null (dcp_model_info_parse (bytes, end - 1, "x.mcapy", &needed, &error));
  g_assert_cmpuint (needed, ==, end);
  info = dcp_model_info_parse (bytes, end, "x.mcapy", &needed, &error);
  g_assert_no_error (error);
  g_assert_nonnull (info);
  g_assert_true (json_node_equal (info->metadata, f->metadata));
  g_assert_cmpuint (info->config.vocab_size, ==, 512);
  g_assert_cmpuint (info->header.n_tensors, ==, G_N_ELEMENTS (specs));
  g_assert_cmpuint (info->header.file_size, ==, len);
}

/* ---- The damaged-file corpus ------------------------------------------------------------ */

static guint64
get64 (const guint8 *p)
{
  guint64 v;
  memcpy (&v, p, 8);
  return GUINT64_FROM_LE (v);
}

static void
put64 (guint8 *p, guint64 v)
{
  v = GUINT64_TO_LE (v);
  memcpy (p, &v, 8);
}

static void
put_le (guint8 *p, guint width, guint64 v)
{
  for (guint i = 0; i < width; i++)
    p[i] = (guint8) (v >> (8 * i));
}

static void
fix_header_checksum (guint8 *b)
{
  put64 (b + 136, dcp_checksum64 (b, 136));
}

/* Recomputes the section checksums (where the sections lie inside the buffer) and the header's,
 * so that a damaged field is met by the reader's own checks and not by a checksum. */
static void
fix_checksums (guint8 *b, gsize len)
{
  static const guint at[3][3] = { { 24, 32, 104 }, { 40, 48, 112 }, { 56, 64, 120 } };

  for (guint s = 0; s < 3; s++)
    {
      guint64 off = get64 (b + at[s][0]), size = get64 (b + at[s][1]);
      if (off <= len && size <= len - off)
        put64 (b + at[s][2], dcp_checksum64 (b + off, size));
    }
  fix_header_checksum (b);
}

/* Opens a damaged copy from memory: it must fail with a CORRUPT_FILE (or NOT_SUPPORTED) error
 * that names the file and contains `field`. */
static void
expect_error (GByteArray *damaged, const char *field, const char *why)
{
  g_autoptr(GBytes) bytes = g_bytes_new (damaged->data, damaged->len);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = dcp_model_file_open_bytes (bytes, "damaged.mcapy", &error);

  if (file != NULL)
    g_error ("%s: the damaged file opened", why);
  g_assert_nonnull (error);
  if (!g_error_matches (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE) && !g_error_matches (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED))
    g_error ("%s: unexpected error %s", why, error->message);
  if (!g_str_has_prefix (error->message, "damaged.mcapy: ") || strstr (error->message, field) == NULL)
    g_error ("%s: the error “%s” does not name “%s”", why, error->message, field);
  g_test_message ("%s: %s", why, error->message);
}

static GByteArray *
copy_of (Fixture *f)
{
  GByteArray *a = g_byte_array_new ();
  g_byte_array_append (a, g_bytes_get_data (f->valid, NULL), g_bytes_get_size (f->valid));
  return a;
}

static void
test_truncated (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  gsize len = g_bytes_get_size (f->valid);
  g_autofree char *cut_path = g_build_filename (f->dir, "cut.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = NULL;
  const guint8 *b = g_bytes_get_data (f->valid, NULL);
  guint64 metadata_end = get64 (b + 24) + get64 (b + 32);

  for (gsize cut = 0; cut < len; cut += cut < 2 * DCP_MODEL_HEADER_SIZE ? 1 : 61)
    {
      g_autoptr(GByteArray) a = copy_of (f);
      g_autofree char *why = g_strdup_printf ("truncated at %" G_GSIZE_FORMAT, cut);
      g_byte_array_set_size (a, cut);
      expect_error (a, cut < DCP_MODEL_HEADER_SIZE ? "header" : cut < metadata_end ? "metadata" : "file_size", why);
    }
  /* On disk, the error names the path. */
  g_file_set_contents (cut_path, g_bytes_get_data (f->valid, NULL), len - 4096, &error);
  g_assert_no_error (error);
  file = dcp_model_file_open (cut_path, &error);
  g_assert_null (file);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_true (g_str_has_prefix (error->message, cut_path));
  g_assert_nonnull (strstr (error->message, "truncated"));
}

static void
test_header_fields (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  static const struct {
    guint at, width;
    guint64 value;
    guint fix;                  /* after the change, recompute: 2 every checksum, 1 the header's, 0 none */
    const char *field;
  } cases[] = {
    { 0, 8, 0x4641524700000000ull, 2, "magic" },
    { 8, 2, 2, 2, "version" },
    { 8, 2, 0, 2, "version" },
    { 12, 4, 128, 2, "header_size" },
    { 16, 8, 0, 2, "metadata_offset" },
    { 16, 8, G_MAXUINT64, 2, "file_size" },
    { 24, 8, 0, 2, "metadata_offset" },
    { 24, 8, G_MAXUINT64 - 10, 2, "metadata_offset" },
    { 32, 8, 0, 2, "metadata_size" },
    { 32, 8, G_MAXUINT64, 2, "metadata_size" },
    { 32, 8, 100, 2, "metadata" },
    { 40, 8, 200, 2, "tokenizer_offset" },
    { 48, 8, G_MAXUINT64 - 200, 2, "tokenizer_size" },
    { 48, 8, 40000, 2, "index_offset" },
    { 56, 8, 0, 2, "index_offset" },
    { 64, 8, 1, 2, "index_size" },
    { 64, 8, G_MAXUINT64, 2, "index" },
    { 72, 8, G_MAXUINT64 / 96 + 2, 2, "n_tensors" },
    { 72, 8, 900, 2, "index_size" },
    { 80, 8, 4097, 2, "data_offset" },
    { 80, 8, G_MAXUINT64 - 4095, 2, "data_offset" },
    { 88, 8, G_MAXUINT64, 2, "data_size" },
    { 88, 8, 4096, 2, "outside the data section" },
    { 96, 4, 3, 2, "alignment" },
    { 96, 4, 0, 2, "alignment" },
    { 104, 8, 12345, 1, "metadata_checksum" },
    { 112, 8, 12345, 1, "tokenizer_checksum" },
    { 120, 8, 12345, 1, "index_checksum" },
    { 136, 8, 12345, 0, "header_checksum" },
    { 128, 8, 1, 0, "header_checksum" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GByteArray) a = copy_of (f);
      g_autofree char *why = g_strdup_printf ("header byte %u = %" G_GINT64_MODIFIER "x", cases[i].at, cases[i].value);

      put_le (a->data + cases[i].at, cases[i].width, cases[i].value);
      if (cases[i].fix == 2)
        fix_checksums (a->data, a->len);
      else if (cases[i].fix == 1)
        fix_header_checksum (a->data);
      expect_error (a, cases[i].field, why);
    }
}

/* Entry e's byte `at` of the index. */
static guint8 *
entry (GByteArray *a, guint e, guint at)
{
  return a->data + get64 (a->data + 56) + e * DCP_MODEL_INDEX_ENTRY_SIZE + at;
}

static void
test_index_entries (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  static const struct {
    guint e, at, width;
    guint64 value;
    const char *field;
  } cases[] = {
    { 1, 0, 8, G_MAXUINT64 - 3, "name_offset" },
    { 1, 8, 4, 0, "name" },
    { 1, 8, 4, 3, "name" },                           /* not NUL-terminated there */
    { 1, 8, 4, 0xffffffffu, "name_offset" },
    { 1, 12, 4, 99, "dtype" },
    { 3, 12, 4, DCP_DTYPE_MXFP4_E2M1, "dtype" },      /* a 1-D tensor in a block format */
    { 1, 16, 4, 0, "ndim" },
    { 1, 16, 4, 7, "ndim" },
    { 0, 24, 8, 127, "shape" },                       /* norm.weight must be [128] */
    { 6, 24, 8, 1ull << 62, "overflows" },            /* vision: not in the config */
    { 6, 32, 8, 1ull << 40, "nbytes" },
    { 1, 80, 8, 0, "nbytes" },
    { 1, 72, 8, 4096 + 8, "offset" },
    { 1, 72, 8, G_MAXUINT64 - 4095, "offset" },
    { 1, 72, 8, 0, "offset" },
  };
  g_autoptr(GByteArray) dup = copy_of (f);
  g_autoptr(GByteArray) overlap = copy_of (f);
  g_autoptr(GByteArray) sum = copy_of (f);
  g_autoptr(GBytes) sum_bytes = NULL;
  g_autoptr(DcpModelFile) file = NULL;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GByteArray) a = copy_of (f);
      g_autofree char *why = g_strdup_printf ("entry %u byte %u = %" G_GINT64_MODIFIER "x", cases[i].e, cases[i].at, cases[i].value);

      put_le (entry (a, cases[i].e, cases[i].at), cases[i].width, cases[i].value);
      fix_checksums (a->data, a->len);
      expect_error (a, cases[i].field, why);
    }

  /* Two entries with one name. */
  memcpy (entry (dup, 2, 0), entry (dup, 1, 0), 12);
  fix_checksums (dup->data, dup->len);
  expect_error (dup, "appears twice", "duplicate name");

  /* Tensor 5 (MXFP8 [256, 128]) placed over tensor 4's bytes. */
  memcpy (entry (overlap, 5, 72), entry (overlap, 4, 72), 8);
  fix_checksums (overlap->data, overlap->len);
  expect_error (overlap, "overlaps", "overlapping tensors");

  /* A wrong tensor checksum opens (data is not read at open) but fails verification. */
  put64 (entry (sum, 2, 88), get64 (entry (sum, 2, 88)) + 1);
  fix_checksums (sum->data, sum->len);
  sum_bytes = g_bytes_new (sum->data, sum->len);
  file = dcp_model_file_open_bytes (sum_bytes, "sum.mcapy", &error);
  g_assert_no_error (error);
  g_assert_false (dcp_model_file_verify (file, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (error->message, "layers.0.mlp.down_proj.weight"));
  g_assert_nonnull (strstr (error->message, "checksum"));
}

/* Replaces the first occurrence of `from` in section s (0 metadata, 1 tokenizer) by `to`, same
 * length, and fixes the checksums. */
static void
patch (GByteArray *a, guint section, const char *from, const char *to)
{
  guint64 off = get64 (a->data + 24 + 16 * section), size = get64 (a->data + 32 + 16 * section);
  guint8 *hit = memmem (a->data + off, size, from, strlen (from));

  g_assert_nonnull (hit);
  g_assert_cmpuint (strlen (from), ==, strlen (to));
  memcpy (hit, to, strlen (to));
  fix_checksums (a->data, a->len);
}

static void
test_metadata (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  static const struct {
    guint section;
    const char *from, *to, *field;
  } cases[] = {
    { 0, "messages", "\xffmessage", "UTF-8" },
    { 0, "{\"architecture\"", "[\"architecture\"", "JSON" },
    { 0, "\"accuracy\"", "\"accurazy\"", "accuracy" },
    { 0, "\"recipe\":{\"name\":\"test\"}", "\"recipe\":\"name-test\"    ", "recipe" },
    { 0, "\"sizes\":{\"text\":1}", "\"sizes\":[\"text\",1]", "sizes" },
    { 0, "\"hidden_size\":128", "\"hidden_size\":-28", "hidden_size" },
    { 0, "\"num_hidden_layers\":4", "\"num_hidden_layers\":5", "layer_types" },
    { 0, "\"linear_num_value_heads\":6", "\"linear_num_value_heads\":5", "linear_num_value_heads" },
    { 0, "\"intermediate_size\":384", "\"intermediate_size\":380", "shape" },
    { 1, "{\"model\"", "[\"model\"", "tokenizer" },
    { 1, "\"BPE\"", "\"BP\xc0\"", "UTF-8" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GByteArray) a = copy_of (f);
      patch (a, cases[i].section, cases[i].from, cases[i].to);
      expect_error (a, cases[i].field, cases[i].to);
    }
}

static void
test_versions (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  g_autoptr(GByteArray) newer = copy_of (f);
  g_autoptr(GByteArray) major = copy_of (f);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = NULL;

  /* A newer minor version, with a member this reader does not know: readable. */
  put_le (newer->data + 10, 2, DCP_MODEL_VERSION_MINOR + 7);
  patch (newer, 0, "\"architecture\"", "\"zrchitecture\"");
  expect_error (newer, "architecture", "a required member renamed");
  patch (newer, 0, "\"zrchitecture\"", "\"architecture\"");
  bytes = g_bytes_new (newer->data, newer->len);
  file = dcp_model_file_open_bytes (bytes, "newer.mcapy", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_model_file_get_header (file)->version_minor, ==, DCP_MODEL_VERSION_MINOR + 7);

  put_le (major->data + 8, 2, DCP_MODEL_VERSION_MAJOR + 1);
  fix_header_checksum (major->data);
  g_clear_pointer (&bytes, g_bytes_unref);
  bytes = g_bytes_new (major->data, major->len);
  g_assert_null (dcp_model_file_open_bytes (bytes, "major.mcapy", &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "version 2.0"));
}

/* Random damage, with and without the checksums fixed up afterwards: no crash, no hang, and a
 * file that still opens has only tensors inside the buffer. */
static void
test_random_damage (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  GRand *rand = g_rand_new_with_seed (7);
  gsize len = g_bytes_get_size (f->valid);
  const guint8 *b = g_bytes_get_data (f->valid, NULL);
  /* The structure: header, metadata, tokenizer, index. */
  const guint64 regions[4][2] = {
    { 0, DCP_MODEL_HEADER_SIZE }, { get64 (b + 24), get64 (b + 32) },
    { get64 (b + 40), get64 (b + 48) }, { get64 (b + 56), get64 (b + 64) },
  };
  guint opened = 0;

  for (guint i = 0; i < 3000; i++)
    {
      g_autoptr(GByteArray) a = copy_of (f);
      g_autoptr(GBytes) bytes = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpModelFile) file = NULL;
      guint flips = g_rand_int_range (rand, 1, 5);

      for (guint k = 0; k < flips; k++)
        {
          /* Mostly the structure, sometimes anywhere. */
          guint r = g_rand_int_range (rand, 0, 5);
          gsize at = r == 4 ? (gsize) g_rand_int_range (rand, 0, (gint32) len)
                            : regions[r][0] + (gsize) g_rand_int_range (rand, 0, (gint32) regions[r][1]);
          a->data[at] ^= 1u << g_rand_int_range (rand, 0, 8);
        }
      if (i % 2)
        fix_checksums (a->data, a->len);
      bytes = g_bytes_new (a->data, a->len);
      file = dcp_model_file_open_bytes (bytes, "random.mcapy", &error);
      if (file == NULL)
        {
          g_assert_nonnull (error);
          continue;
        }
      opened++;
      for (guint t = 0; t < dcp_model_file_get_n_tensors (file); t++)
        {
          const DcpTensorView *v = dcp_model_file_get_tensor (file, t);
          const guint8 *base = g_bytes_get_data (bytes, NULL);
          g_assert_true (v->data >= base && v->data + v->nbytes <= base + len);
        }
      dcp_model_file_verify (file, NULL);
    }
  g_test_message ("%u of 3000 damaged copies still opened", opened);
  g_rand_free (rand);
}

/* An unfinished write leaves nothing under the final name, nor a temporary file. */
static void
test_unfinished_write (Fixture *f, gconstpointer user_data G_GNUC_UNUSED)
{
  g_autofree char *path = g_build_filename (f->dir, "unfinished.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = NULL;
  guint64 shape[2] = { 64, 64 };
  guint8 piece[1024] = { 1 };
  const char *name;
  guint files = 0;

  for (guint round = 0; round < 2; round++)
    {
      g_autoptr(DcpModelWriter) w = dcp_model_writer_new (path, &error);
      g_assert_no_error (error);
      g_assert_cmpint (dcp_model_writer_add_tensor (w, "layers.0.mlp.up_proj.weight", DCP_DTYPE_BF16, shape, 2, &error), ==, 0);
      g_assert_cmpint (dcp_model_writer_add_tensor (w, "layers.0.mlp.up_proj.weight", DCP_DTYPE_BF16, shape, 2, &error), ==, -1);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_true (dcp_model_writer_begin (w, NULL, 4096, &error));
      g_assert_true (dcp_model_writer_write (w, 0, 0, piece, sizeof piece, &error));
      if (round == 1)
        {
          /* Finishing with a tensor half written fails. */
          g_assert_false (dcp_model_writer_finish (w, f->metadata, &error));
          g_assert_error (error, DCP_ERROR, DCP_ERROR_FAILED);
          g_clear_error (&error);
        }
    }
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  dir = g_dir_open (f->dir, 0, NULL);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_assert_false (g_str_has_prefix (name, "unfinished"));
      files++;
    }
  g_assert_cmpuint (files, ==, 1);   /* small.mcapy alone */
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, fn) g_test_add ("/model-file/" path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("round-trip", test_round_trip);
  ADD ("parse-head", test_parse_head);
  ADD ("damaged/truncated", test_truncated);
  ADD ("damaged/header-fields", test_header_fields);
  ADD ("damaged/index-entries", test_index_entries);
  ADD ("damaged/metadata", test_metadata);
  ADD ("damaged/random", test_random_damage);
  ADD ("versions", test_versions);
  ADD ("unfinished-write", test_unfinished_write);
#undef ADD
  return g_test_run ();
}
