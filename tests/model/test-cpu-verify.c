/* SPDX-License-Identifier: MIT */
/* A verify step on the CPU backend: its row draws are what one-token steps would draw after
 * each draft (greedy and seeded sampled, penalties on), the sampler is left as it was; and
 * dcp_backend_state_keep (n) leaves the state a fresh one that read only those n rows has, to
 * the bit, for GDN and attention layers, paged and unpaged. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"

typedef struct {
  DcpCheckpoint *checkpoint;
  DcpBackend *backend;
  guint vocab;
} Model;

static Model *
model_open (const char *name)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", name, NULL);
  g_autofree char *tokenizer_dir =
      g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  Model *m = g_new0 (Model, 1);
  DcpTensorSource source;

  m->checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  m->vocab = dcp_checkpoint_get_config (m->checkpoint)->vocab_size;
  source = dcp_checkpoint_get_source (m->checkpoint);
  m->backend = dcp_backend_cpu_new (dcp_checkpoint_get_config (m->checkpoint), &source, 2, &error);
  g_assert_no_error (error);
  return m;
}

static void
model_free (Model *m)
{
  g_object_unref (m->backend);
  dcp_checkpoint_free (m->checkpoint);
  g_free (m);
}

static void
run (DcpBackend *b, DcpBatchItem *item)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_backend_forward (b, item, 1, &error));
  g_assert_no_error (error);
}

static void
read_tokens (DcpBackend *b, DcpSeqState *s, const guint32 *ids, guint n)
{
  DcpBatchItem item = { .state = s, .tokens = ids, .n_tokens = n };

  run (b, &item);
}

static guint32 *
random_ids (guint n, guint vocab, guint seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  guint32 *ids = g_new (guint32, n);

  for (guint i = 0; i < n; i++)
    ids[i] = g_rand_int_range (rand, 0, vocab);
  return ids;
}

static GByteArray *
saved (DcpBackend *b, DcpSeqState *s)
{
  GByteArray *out = g_byte_array_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_backend_state_save (b, s, out, &error));
  g_assert_no_error (error);
  return out;
}

static DcpSeqSampler *
sampler_new (DcpBackend *b, double temperature, const guint32 *prompt, guint n_prompt)
{
  DcpSamplerParams p;
  g_autoptr(GError) error = NULL;
  DcpSeqSampler *s;

  dcp_sampler_params_init (&p);
  p.temperature = temperature;
  p.top_k = 40;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.3;
  p.repetition_penalty = 1.2;
  p.seed = 77;
  s = dcp_backend_sampler_new (b, &p, &error);
  g_assert_no_error (error);
  dcp_backend_sampler_add_prompt (b, s, prompt, n_prompt);
  return s;
}

/* Rows 1 + k: row j's draw (and hidden row) equals the draw (and hidden row) of one-token steps
 * that read the anchor and drafts 1 .. j one at a time, each accepted; the verify's sampler has
 * taken no draw. With the
 * recurrent delta rule (chunk size 0) both read the same logits bit for bit. The drafts repeat
 * prompt tokens and each other, so the penalties of later rows differ from row 0's. */
static void
test_row_draws (gconstpointer data)
{
  double temperature = *(const double *) data;
  enum { PROMPT = 30, K = 7 };
  Model *m = model_open ("odd-sizes");
  DcpBackend *b = m->backend;
  g_autofree guint32 *ids = random_ids (PROMPT + 1, m->vocab, 5);
  guint32 verify[1 + K], rows[1 + K];
  guint H = dcp_backend_get_config (b)->hidden_size;
  g_autofree float *hidden = g_new (float, (gsize) (1 + K) * H), *h1 = g_new (float, H);
  DcpSeqState *s = dcp_backend_state_new (b, NULL), *one = dcp_backend_state_new (b, NULL);
  DcpSeqSampler *vs = sampler_new (b, temperature, ids, PROMPT);
  DcpSeqSampler *os = sampler_new (b, temperature, ids, PROMPT);
  DcpBatchItem item = { .state = s,
                        .tokens = verify,
                        .n_tokens = 1 + K,
                        .sampler = vs,
                        .row_tokens = rows,
                        .hidden = hidden };
  guint64 draws = dcp_sampler_peek_draw (dcp_seq_sampler_get_host (vs));

  dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (b), 0);
  verify[0] = ids[PROMPT];
  for (guint j = 1; j <= K; j++)
    verify[j] = j % 3 == 0 ? verify[j - 1] : ids[(j * 7) % PROMPT];
  read_tokens (b, s, ids, PROMPT);
  read_tokens (b, one, ids, PROMPT);
  run (b, &item);
  g_assert_cmpuint (dcp_sampler_peek_draw (dcp_seq_sampler_get_host (vs)), ==, draws);
  for (guint j = 0; j <= K; j++)
    {
      DcpBatchItem step = {
        .state = one, .tokens = &verify[j], .n_tokens = 1, .sampler = os, .hidden = h1
      };

      run (b, &step);
      g_assert_cmpuint (rows[j], ==, step.token);
      /* with row draws the hidden rows of every row come back, logits_mode NONE or not */
      g_assert_cmpmem (hidden + (gsize) j * H, H * sizeof (float), h1, H * sizeof (float));
      dcp_backend_sampler_accept (b, os, j < K ? verify[j + 1] : step.token);
    }
  if (temperature > 0)
    g_assert_cmpuint (dcp_sampler_peek_draw (dcp_seq_sampler_get_host (os)), ==, draws + 1 + K);

  /* a ban or a mask cannot go with row draws */
  {
    g_autoptr(GError) error = NULL;
    guint32 ban = 3;

    item.banned = &ban;
    item.n_banned = 1;
    g_assert_false (dcp_backend_forward (b, &item, 1, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  }
  dcp_backend_sampler_free (b, vs);
  dcp_backend_sampler_free (b, os);
  dcp_backend_state_free (b, s);
  dcp_backend_state_free (b, one);
  model_free (m);
}

typedef struct {
  const char *model;
  gboolean paged;
  guint chunk;
} KeepCase;

static DcpSeqState *
state_new (DcpBackend *b, DcpKvPool *pool, guint first_page)
{
  g_autoptr(GError) error = NULL;
  DcpSeqState *s;
  guint32 pages[8];

  if (pool == NULL)
    return dcp_backend_state_new (b, NULL);
  s = dcp_backend_state_new_paged (b, pool, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (pages); i++)
    pages[i] = first_page + i;
  g_assert_true (dcp_backend_state_set_pages (b, s, pages, G_N_ELEMENTS (pages), &error));
  return s;
}

static double
rel_error (const float *a, const float *b, guint n)
{
  double num = 0, den = 0;

  for (guint i = 0; i < n; i++)
    {
      num += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
      den += (double) b[i] * b[i];
    }
  return den > 0 ? sqrt (num / den) : sqrt (num);
}

/* Prompt, then a step of 1 + 15 rows that saves; state_keep (n) for every n against a fresh
 * state that read the prompt and the same n rows as one item: the saved states are the same
 * bytes, and so are the logits of the next step (where both took the same form of the delta
 * rule: within 1e-5 where they did not). Then the save is spent. */
static void
test_keep (gconstpointer data)
{
  const KeepCase *c = data;
  enum { PROMPT = 37, ROWS = 16, PAGE = 16 };
  Model *m = model_open (c->model);
  DcpBackend *b = m->backend;
  guint V = m->vocab;
  g_autofree guint32 *ids = random_ids (PROMPT + ROWS + 1, V, 9);
  g_autofree float *next = g_new (float, V), *ref_next = g_new (float, V);
  g_autoptr(GError) error = NULL;
  DcpKvPool *pool = NULL;
  DcpStepSave *save = dcp_backend_step_save_new (b, &error);

  g_assert_no_error (error);
  dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (b), c->chunk);
  if (c->paged)
    {
      pool = dcp_backend_kv_pool_new (b, 16, PAGE, &error);
      g_assert_no_error (error);
    }
  for (guint n = 0; n <= ROWS; n++)
    {
      DcpSeqState *s = state_new (b, pool, 0), *ref = state_new (b, pool, 8);
      DcpBatchItem item = { .state = s, .tokens = ids + PROMPT, .n_tokens = ROWS, .save = save };
      DcpBatchItem step = { .state = s,
                            .tokens = ids + PROMPT + ROWS,
                            .n_tokens = 1,
                            .logits_mode = DCP_LOGITS_LAST,
                            .logits = next };
      g_autoptr(GByteArray) got = NULL, want = NULL;

      read_tokens (b, s, ids, PROMPT);
      run (b, &item);
      g_assert_true (dcp_backend_state_keep (b, s, save, n, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (dcp_backend_state_get_n_tokens (b, s), ==, PROMPT + n);
      read_tokens (b, ref, ids, PROMPT);
      if (n > 0)
        read_tokens (b, ref, ids + PROMPT, n);
      got = saved (b, s);
      want = saved (b, ref);
      run (b, &step);
      step.state = ref;
      step.logits = ref_next;
      run (b, &step);
      if (c->chunk > 0 && n == 1)
        {
          /* the step's row 0 went through the chunked rule, the fresh state's through the
           * recurrence: the same math, rounded differently */
          g_assert_cmpuint (got->len, ==, want->len);
          g_assert_cmpfloat (rel_error (next, ref_next, V), <=, 1e-5);
        }
      else
        {
          g_assert_cmpmem (got->data, got->len, want->data, want->len);
          g_assert_cmpmem (next, V * sizeof (float), ref_next, V * sizeof (float));
        }

      /* spent: a second keep is refused */
      g_assert_false (dcp_backend_state_keep (b, s, save, 0, &error));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      dcp_backend_state_free (b, s);
      dcp_backend_state_free (b, ref);
    }
  dcp_backend_step_save_free (b, save);
  dcp_backend_kv_pool_free (b, pool);
  model_free (m);
}

/* More rows than a save holds, and a keep of more rows than the step read, are refused. */
static void
test_keep_bad (void)
{
  Model *m = model_open ("odd-sizes");
  DcpBackend *b = m->backend;
  g_autofree guint32 *ids = random_ids (DCP_STEP_SAVE_ROWS + 1, m->vocab, 3);
  g_autoptr(GError) error = NULL;
  DcpStepSave *save = dcp_backend_step_save_new (b, NULL);
  DcpSeqState *s = dcp_backend_state_new (b, NULL);
  DcpBatchItem item = {
    .state = s, .tokens = ids, .n_tokens = DCP_STEP_SAVE_ROWS + 1, .save = save
  };

  g_assert_false (dcp_backend_forward (b, &item, 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (b, s), ==, 0);
  item.n_tokens = 4;
  run (b, &item);
  g_assert_false (dcp_backend_state_keep (b, s, save, 5, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (b, s), ==, 4);
  dcp_backend_step_save_free (b, save);
  dcp_backend_state_free (b, s);
  model_free (m);
}

int
main (int argc, char **argv)
{
  static const double greedy = 0, sampled = 0.8;
  static const KeepCase cases[] = {
    { "odd-sizes", FALSE, 64 },  { "odd-sizes", TRUE, 64 }, { "odd-sizes", FALSE, 0 },
    { "real-heads", FALSE, 64 }, { "real-heads", TRUE, 0 },
  };

  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/cpu-verify/row-draws/greedy", &greedy, test_row_draws);
  g_test_add_data_func ("/cpu-verify/row-draws/sampled", &sampled, test_row_draws);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path =
          g_strdup_printf ("/cpu-verify/keep/%s/%s/chunk-%u", cases[i].model,
                           cases[i].paged ? "paged" : "unpaged", cases[i].chunk);

      g_test_add_data_func (path, &cases[i], test_keep);
    }
  g_test_add_func ("/cpu-verify/keep-bad", test_keep_bad);
  return g_test_run ();
}
