/* SPDX-License-Identifier: MIT */
/* decapybara-bench: the CUDA backend's speed on a model of random weights in the real 27B
 * architecture (docs/MODEL.md §1.2), made directly in VRAM for each recipe: full width,
 * --layers N layers, every fourth one full attention. It prints decode tokens/s per batch size
 * and context next to the floor (the bytes a step must read over the bandwidth that
 * dcpk_bandwidth_probe measures in the same run), prefill tokens/s per prompt size next to the
 * limit (the prompt's matrix FLOPs over the BF16 matrix rate), and the decode speed of 8
 * conversations while a prompt is read under the server's balanced prefill policy (its time
 * share, dcp-time-share.h, decides which calls carry a chunk); with --verify, the step time of
 * speculative verify steps (each conversation reads 1..16 rows, each row drawn on the device
 * and the GDN inputs saved, as the scheduler's verify items do) at batch 1, 4 and 12 next to the
 * 1-row step, and the cost of cutting a step back to half its rows (state_keep) next to the
 * replay it replaces. Contexts are synthetic: random
 * KV and GDN states (dcp_backend_cuda_state_fill_random). With --integrity: a full sweep of
 * the integrity monitor, and each decode row again with the monitor off, at 600 s and at 1 s
 * (dcp-bench-integrity.h). docs/PERFORMANCE.md explains the columns. Exit status: 0, 1 device error, 2 bad options, 77 no CUDA device. */
#define G_LOG_DOMAIN "decapybara-bench"

#include "config.h"

#include <json-glib/json-glib.h>
#include <locale.h>
#include <string.h>

#include "dcp-backend-cuda.h"
#include "dcp-bench-integrity.h"
#include "dcp-bench-options.h"
#include "dcp-cuda-error.h"
#include "dcp-cuda-forward.h"
#include "dcp-kernels.h"
#include "dcp-model-cost.h"
#include "dcp-model-file.h"
#include "dcp-time-share.h"

#define WARMUP_STEPS 3
/* The largest batch of the verify run. */
#define DCP_BENCH_VERIFY_BATCH 12
/* The mixed run plans the decoders' KV for at most this many calls per prompt chunk (the
 * balanced share makes ~(prompt call / decode call) decode-only calls after each chunk: ~15 on
 * the H200), and stops there. */
#define MIXED_CALLS_PER_CHUNK 64
/* VRAM kept free beside weights, states and KV: activations, graphs, the CUDA runtime's own. */
#define RESERVE_BYTES ((guint64) 3 << 30)

typedef struct {
  const DcpBenchOptions *opt;
  DcpRecipe recipe;
  DcpModelConfig config;
  DcpModelCost cost;
  double gbps;
  DcpBackend *backend;
  guint64 step_bytes;            /* weights one step reads, as the backend counts them */
  guint64 pool_tokens;           /* the KV pool's size */
  float *logits;                 /* DCP_BENCH_MAX_BATCH + 1 rows */
  GRand *rand;
  DcpBenchIntegrity integrity;   /* --integrity */
  DcpModelFile *file;            /* --model: its weights instead of random ones, or NULL */
  DcpIntegrityMonitor *monitor;  /* called after every timed decode step, or NULL */
} Bench;

/* KV pool tokens that n sequences of len tokens each take, in whole pages. */
static guint64
pool_need (guint n, guint64 len)
{
  return (guint64) n * dcp_cuda_kv_pages_for ((guint) len) * DCPK_KV_PAGE_TOKENS;
}

/* ---- output: a text table or one JSON object a line ---- */

static JsonBuilder *
row_begin (Bench *b, const char *kind)
{
  JsonBuilder *j = json_builder_new ();

  json_builder_begin_object (j);
  json_builder_set_member_name (j, "kind");
  json_builder_add_string_value (j, kind);
  if (b != NULL)
    {
      json_builder_set_member_name (j, "recipe");
      json_builder_add_string_value (j, dcp_recipe_name (b->recipe));
      json_builder_set_member_name (j, "layers");
      json_builder_add_int_value (j, b->config.n_layers);
    }
  return j;
}

static void
row_int (JsonBuilder *j, const char *name, gint64 v)
{
  json_builder_set_member_name (j, name);
  json_builder_add_int_value (j, v);
}

static void
row_double (JsonBuilder *j, const char *name, double v)
{
  json_builder_set_member_name (j, name);
  json_builder_add_double_value (j, v);
}

static void
row_string (JsonBuilder *j, const char *name, const char *v)
{
  json_builder_set_member_name (j, name);
  json_builder_add_string_value (j, v);
}

static void
row_end (JsonBuilder *j)
{
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_end_object (j);
  root = json_builder_get_root (j);
  text = json_to_string (root, FALSE);
  g_print ("%s\n", text);
  g_object_unref (j);
}

/* A combination left out, and why. */
static void
skip (Bench *b, const char *what, const char *why)
{
  if (b->opt->json)
    {
      JsonBuilder *j = row_begin (b, "skip");

      row_string (j, "what", what);
      row_string (j, "reason", why);
      row_end (j);
    }
  else
    g_print ("  %s: skipped, %s\n", what, why);
}

/* ---- decode ---- */

static gboolean
states_new (Bench *b, DcpSeqState **states, guint n, guint context, GError **error)
{
  for (guint s = 0; s < n; s++)
    if ((states[s] = dcp_backend_state_new (b->backend, error)) == NULL ||
        !dcp_backend_cuda_state_fill_random (DCP_BACKEND_CUDA (b->backend), states[s], context,
                                             g_rand_int (b->rand), error))
      return FALSE;
  return TRUE;
}

static void
states_free (Bench *b, DcpSeqState **states, guint n)
{
  for (guint s = 0; s < n; s++)
    if (states[s] != NULL)
      dcp_backend_state_free (b->backend, states[s]);
}

/* Decode items of one token each for states[0..n), logits into rows 0..n. */
static void
decode_items (Bench *b, DcpSeqState **states, guint32 *tokens, DcpBatchItem *items, guint n)
{
  for (guint s = 0; s < n; s++)
    {
      tokens[s] = (guint32) g_rand_int_range (b->rand, 0, (gint32) b->config.vocab_size);
      items[s] = (DcpBatchItem) { states[s], &tokens[s], 1, DCP_LOGITS_LAST,
                                  b->logits + (gsize) s * b->config.vocab_size, NULL };
    }
}

/* Seconds per step of n sequences over steps timed steps, after the untimed warm-up. */
static gboolean
time_decode (Bench *b, DcpSeqState **states, guint n, guint steps, double *seconds,
             GError **error)
{
  DcpBatchItem items[DCP_BENCH_MAX_BATCH];
  guint32 tokens[DCP_BENCH_MAX_BATCH];
  gint64 start = 0;

  for (guint i = 0; i < WARMUP_STEPS + steps; i++)
    {
      if (i == WARMUP_STEPS)
        start = g_get_monotonic_time ();
      decode_items (b, states, tokens, items, n);
      if (!dcp_backend_forward (b->backend, items, n, error))
        return FALSE;
      if (b->monitor != NULL)
        dcp_integrity_monitor_between_steps (b->monitor, TRUE);
    }
  *seconds = (g_get_monotonic_time () - start) / 1e6 / steps;
  return TRUE;
}

static gboolean
run_decode (Bench *b, guint batch, guint context, GError **error)
{
  DcpSeqState *states[DCP_BENCH_MAX_BATCH] = { NULL };
  guint steps = b->opt->steps;
  guint64 need = pool_need (batch, (guint64) context + WARMUP_STEPS + steps);
  guint64 mean_context = (guint64) context + WARMUP_STEPS + steps / 2;
  guint64 kv_state_bytes, bytes;
  double seconds, floor_s;
  gboolean ok;

  if (b->cost.n_attn > 0 && need > b->pool_tokens)
    {
      g_autofree char *what = g_strdup_printf ("decode batch %u at context %u", batch, context);
      g_autofree char *why = g_strdup_printf ("needs %.1f GB of KV, %.1f GB fit beside the weights",
                                              need * b->cost.kv_bytes_per_token / 1e9,
                                              b->pool_tokens * b->cost.kv_bytes_per_token / 1e9);
      skip (b, what, why);
      return TRUE;
    }
  ok = states_new (b, states, batch, context, error) &&
       time_decode (b, states, batch, steps, &seconds, error);
  states_free (b, states, batch);
  if (!ok)
    return FALSE;
  kv_state_bytes = dcp_model_cost_decode_bytes (&b->cost, batch, mean_context) - b->cost.weight_bytes;
  bytes = b->step_bytes + kv_state_bytes;
  floor_s = bytes / (b->gbps * 1e9);
  if (b->opt->json)
    {
      JsonBuilder *j = row_begin (b, "decode");

      row_int (j, "batch", batch);
      row_int (j, "context", context);
      json_builder_set_member_name (j, "context_synthetic");
      json_builder_add_boolean_value (j, TRUE);
      row_double (j, "ms_per_step", seconds * 1e3);
      row_double (j, "tokens_per_s", batch / seconds);
      row_int (j, "weight_bytes", (gint64) b->step_bytes);
      row_int (j, "kv_state_bytes", (gint64) kv_state_bytes);
      row_double (j, "floor_ms", floor_s * 1e3);
      row_double (j, "percent_of_floor", 100 * floor_s / seconds);
      row_end (j);
    }
  else
    g_print ("  %-7u %-9u %9.3f %10.1f %11.2f %12.2f %10.3f %8.1f%%\n", batch, context,
             seconds * 1e3, batch / seconds, b->step_bytes / 1e9, kv_state_bytes / 1e9,
             floor_s * 1e3, 100 * floor_s / seconds);
  return TRUE;
}

/* Decode with the monitor off, on at 600 s (the default) and on at 1 s (always behind, so at
 * its 1% cap): tokens/s of each and the cost. */
static gboolean
run_decode_integrity (Bench *b, guint batch, guint context, GError **error)
{
  DcpSeqState *states[DCP_BENCH_MAX_BATCH] = { NULL };
  DcpIntegrityMonitor *monitors[3] = { NULL, b->integrity.every_600s, b->integrity.every_1s };
  double seconds[3] = { 0 };
  DcpIntegrityStats st;
  gboolean ok;

  if (b->cost.n_attn > 0 &&
      pool_need (batch, (guint64) context + WARMUP_STEPS + b->opt->steps) > b->pool_tokens)
    return TRUE;   /* run_decode said why */
  ok = states_new (b, states, batch, context, error);
  for (guint m = 0; ok && m < G_N_ELEMENTS (monitors); m++)
    {
      b->monitor = monitors[m];
      ok = time_decode (b, states, batch, b->opt->steps, &seconds[m], error);
    }
  b->monitor = NULL;
  states_free (b, states, batch);
  if (!ok)
    return FALSE;
  dcp_integrity_monitor_get_stats (b->integrity.every_1s, &st);
  if (b->opt->json)
    {
      JsonBuilder *j = row_begin (b, "decode_integrity");

      row_int (j, "batch", batch);
      row_int (j, "context", context);
      row_double (j, "tokens_per_s_off", batch / seconds[0]);
      row_double (j, "tokens_per_s_600s", batch / seconds[1]);
      row_double (j, "tokens_per_s_1s", batch / seconds[2]);
      row_double (j, "cost_percent_600s", 100 * (seconds[1] / seconds[0] - 1));
      row_double (j, "cost_percent_1s", 100 * (seconds[2] / seconds[0] - 1));
      row_end (j);
    }
  else
    g_print ("  integrity: batch %-3u context %-7u %8.1f tokens/s off, %8.1f every 600 s "
             "(%+.2f%%), %8.1f every 1 s (%+.2f%%; %" G_GUINT64_FORMAT " tensors checked so far)\n",
             batch, context, batch / seconds[0], batch / seconds[1],
             100 * (seconds[0] / seconds[1] - 1), batch / seconds[2],
             100 * (seconds[0] / seconds[2] - 1), st.tensors_checked);
  return TRUE;
}

/* A full sweep of the weights (the monitor's, and the plain sums) against the bandwidth. */
static gboolean
run_sweep (Bench *b, GError **error)
{
  double sweep_ms;

  if (!dcp_bench_integrity_init (&b->integrity, b->backend, &sweep_ms, error))
    return FALSE;
  if (b->opt->json)
    {
      JsonBuilder *j = row_begin (b, "integrity_sweep");

      row_int (j, "tensors", b->integrity.n_tensors);
      row_int (j, "bytes", (gint64) b->integrity.bytes);
      row_double (j, "sweep_ms", sweep_ms);
      row_double (j, "sums_ms", b->integrity.first_sweep_ms);
      row_double (j, "gbps", b->integrity.bytes / (sweep_ms * 1e6));
      row_double (j, "floor_ms", b->integrity.bytes / (b->gbps * 1e6));
      row_end (j);
    }
  else
    g_print ("  integrity sweep: %u tensors, %.2f GB in %.2f ms (%.0f GB/s; floor %.2f ms); "
             "taking the sums %.2f ms\n", b->integrity.n_tensors, b->integrity.bytes / 1e9,
             sweep_ms, b->integrity.bytes / (sweep_ms * 1e6), b->integrity.bytes / (b->gbps * 1e6),
             b->integrity.first_sweep_ms);
  return TRUE;
}

/* ---- speculative verify ---- */

/* What the verify run keeps per conversation: a greedy sampler (the draws on the device, as
 * the scheduler's items draw) and a step save. */
typedef struct {
  DcpSeqState *states[DCP_BENCH_MAX_BATCH];
  DcpSeqSampler *samplers[DCP_BENCH_MAX_BATCH];
  DcpStepSave *saves[DCP_BENCH_MAX_BATCH];
  guint32 tokens[DCP_BENCH_MAX_BATCH * DCP_BENCH_VERIFY_ROWS];
  guint32 drawn[DCP_BENCH_MAX_BATCH * DCP_BENCH_VERIFY_ROWS];
} Verify;

static gboolean
verify_new (Bench *b, Verify *v, guint batch, guint context, GError **error)
{
  DcpSamplerParams p;

  dcp_sampler_params_init (&p);
  p.temperature = 0;
  if (!states_new (b, v->states, batch, context, error))
    return FALSE;
  for (guint s = 0; s < batch; s++)
    if ((v->samplers[s] = dcp_backend_sampler_new (b->backend, &p, error)) == NULL ||
        (v->saves[s] = dcp_backend_step_save_new (b->backend, error)) == NULL)
      return FALSE;
  return TRUE;
}

static void
verify_free (Bench *b, Verify *v, guint batch)
{
  states_free (b, v->states, batch);
  for (guint s = 0; s < batch; s++)
    {
      dcp_backend_sampler_free (b->backend, v->samplers[s]);
      dcp_backend_step_save_free (b->backend, v->saves[s]);
    }
}

/* One step of rows random tokens per conversation: a verify item (row draws, the GDN inputs
 * saved) or, with rows 1, the one-token decode item that draws its token. */
static gboolean
verify_step (Bench *b, Verify *v, guint batch, guint rows, GError **error)
{
  DcpBatchItem items[DCP_BENCH_MAX_BATCH];

  for (guint s = 0; s < batch; s++)
    {
      for (guint r = 0; r < rows; r++)
        v->tokens[s * rows + r] =
            (guint32) g_rand_int_range (b->rand, 0, (gint32) b->config.vocab_size);
      items[s] = (DcpBatchItem){ .state = v->states[s],
                                 .tokens = &v->tokens[s * rows],
                                 .n_tokens = rows,
                                 .sampler = v->samplers[s] };
      if (rows > 1)
        {
          items[s].row_tokens = &v->drawn[s * rows];
          items[s].save = v->saves[s];
        }
    }
  return dcp_backend_forward (b->backend, items, batch, error);
}

/* A rejected draft undone, keeping n of the step's rows: cut back from the saves, or (replay:
 * the way before them) the GDN state before the step back and the n rows read again. */
static gboolean
verify_undo (Bench *b, Verify *v, guint batch, guint rows, guint n, gboolean replay, GError **error)
{
  DcpBatchItem items[DCP_BENCH_MAX_BATCH];

  for (guint s = 0; s < batch; s++)
    {
      if (!dcp_backend_state_keep (b->backend, v->states[s], v->saves[s], replay ? 0 : n, error))
        return FALSE;
      items[s] =
          (DcpBatchItem){ .state = v->states[s], .tokens = &v->tokens[s * rows], .n_tokens = n };
    }
  return !replay || dcp_backend_forward (b->backend, items, batch, error);
}

/* Seconds per verify step of rows rows per conversation, and per undo that keeps half of them
 * (keep: state_keep; replay: restore and read again), each step followed by one undo, the two
 * kinds in turn. */
static gboolean
time_verify (Bench *b, Verify *v, guint batch, guint rows, double *step_s, double *keep_s,
             double *replay_s, GError **error)
{
  gint64 t_step = 0, t_undo[2] = { 0, 0 }, t0;
  guint n_undo[2] = { 0, 0 };

  for (guint i = 0; i < WARMUP_STEPS + b->opt->steps; i++)
    {
      gboolean timed = i >= WARMUP_STEPS, replay = i % 2;

      t0 = g_get_monotonic_time ();
      if (!verify_step (b, v, batch, rows, error))
        return FALSE;
      if (timed)
        t_step += g_get_monotonic_time () - t0;
      if (rows == 1)
        continue;
      t0 = g_get_monotonic_time ();
      if (!verify_undo (b, v, batch, rows, rows / 2, replay, error))
        return FALSE;
      if (timed)
        {
          t_undo[replay] += g_get_monotonic_time () - t0;
          n_undo[replay]++;
        }
    }
  *step_s = t_step / 1e6 / b->opt->steps;
  *keep_s = n_undo[0] > 0 ? t_undo[0] / 1e6 / n_undo[0] : 0;
  *replay_s = n_undo[1] > 0 ? t_undo[1] / 1e6 / n_undo[1] : 0;
  return TRUE;
}

/* Verify steps of 1..DCP_BENCH_VERIFY_ROWS rows per conversation at batch 1, 4 and 12, each
 * against the 1-row step at the same context, with the cost of undoing a rejection both ways
 * (fresh synthetic states for every row count). */
static gboolean
run_verify (Bench *b, guint context, GError **error)
{
  static const guint batches[] = { 1, 4, DCP_BENCH_VERIFY_BATCH };

  if (!b->opt->json)
    g_print ("  %-7s %-9s %5s %9s %9s %10s %9s %10s\n", "batch", "context", "rows", "ms/step",
             "x 1-row", "rows/s", "keep ms", "replay ms");
  for (guint i = 0; i < G_N_ELEMENTS (batches); i++)
    {
      guint batch = batches[i];
      double one = 0;

      if (b->cost.n_attn > 0 &&
          pool_need (batch, (guint64) context + (WARMUP_STEPS + b->opt->steps) * DCP_BENCH_VERIFY_ROWS) > b->pool_tokens)
        {
          g_autofree char *what = g_strdup_printf ("verify batch %u at context %u", batch, context);

          skip (b, what, "the KV does not fit beside the weights");
          continue;
        }
      for (guint rows = 1; rows <= DCP_BENCH_VERIFY_ROWS; rows++)
        {
          Verify v = { 0 };
          double step = 0, keep = 0, replay = 0;
          gboolean ok = verify_new (b, &v, batch, context, error) &&
                        time_verify (b, &v, batch, rows, &step, &keep, &replay, error);

          verify_free (b, &v, batch);
          if (!ok)
            return FALSE;
          if (rows == 1)
            one = step;
          if (b->opt->json)
            {
              JsonBuilder *j = row_begin (b, "verify");

              row_int (j, "batch", batch);
              row_int (j, "context", context);
              row_int (j, "rows", rows);
              row_double (j, "ms_per_step", step * 1e3);
              row_double (j, "times_one_row", step / one);
              row_double (j, "keep_ms", keep * 1e3);
              row_double (j, "replay_ms", replay * 1e3);
              row_end (j);
            }
          else
            g_print ("  %-7u %-9u %5u %9.3f %9.2f %10.1f %9.3f %10.3f\n", batch, context, rows,
                     step * 1e3, step / one, batch * rows / step, keep * 1e3, replay * 1e3);
        }
    }
  return TRUE;
}

/* ---- prefill ---- */

static guint32 *
random_tokens (Bench *b, guint n)
{
  guint32 *t = g_new (guint32, MAX (n, 1));

  for (guint i = 0; i < n; i++)
    t[i] = (guint32) g_rand_int_range (b->rand, 0, (gint32) b->config.vocab_size);
  return t;
}

static void
print_prefill (Bench *b, guint size, guint done, double seconds)
{
  double limit_s = dcp_model_cost_prefill_flops (&b->config, &b->cost, 0, done) /
                   (b->opt->tflops * 1e12);

  if (b->opt->json)
    {
      JsonBuilder *j = row_begin (b, "prefill");

      row_int (j, "prompt", size);
      row_int (j, "tokens_done", done);
      row_int (j, "chunk", b->opt->chunk);
      row_double (j, "seconds", seconds);
      row_double (j, "tokens_per_s", done / seconds);
      row_double (j, "limit_s", limit_s);
      row_double (j, "percent_of_limit", 100 * limit_s / seconds);
      row_end (j);
    }
  else
    g_print ("  %-9u %-9u %9.2f %10.1f %10.4f %9.3f%%%s\n", size, done, seconds, done / seconds,
             limit_s, 100 * limit_s / seconds, done < size ? "  (stopped at --max-seconds)" : "");
}

/* One prompt of size tokens in chunks; *rate (tokens/s of the last size run, 0 before the
 * first) predicts whether it fits in --max-seconds. */
static gboolean
run_prefill (Bench *b, guint size, double *rate, GError **error)
{
  g_autofree guint32 *tokens = NULL;
  DcpSeqState *state;
  gint64 start;
  guint done = 0;
  double seconds = 0;

  if (b->cost.n_attn > 0 && pool_need (1, size) > b->pool_tokens)
    {
      g_autofree char *what = g_strdup_printf ("prefill of %u tokens", size);

      skip (b, what, "its KV does not fit beside the weights");
      return TRUE;
    }
  if (*rate > 0 && size / *rate > b->opt->max_seconds)
    {
      g_autofree char *what = g_strdup_printf ("prefill of %u tokens", size);
      g_autofree char *why = g_strdup_printf ("about %.0f s at the last size's %.1f tokens/s, "
                                              "over --max-seconds %.0f", size / *rate, *rate,
                                              b->opt->max_seconds);
      skip (b, what, why);
      return TRUE;
    }
  tokens = random_tokens (b, size);
  if ((state = dcp_backend_state_new (b->backend, error)) == NULL)
    return FALSE;
  start = g_get_monotonic_time ();
  while (done < size && seconds <= b->opt->max_seconds)
    {
      guint n = MIN (b->opt->chunk, size - done);
      gboolean last = done + n == size;
      DcpBatchItem item = { state, tokens + done, n, last ? DCP_LOGITS_LAST : DCP_LOGITS_NONE,
                            last ? b->logits : NULL, NULL };

      if (!dcp_backend_forward (b->backend, &item, 1, error))
        {
          dcp_backend_state_free (b->backend, state);
          return FALSE;
        }
      done += n;
      seconds = (g_get_monotonic_time () - start) / 1e6;
    }
  dcp_backend_state_free (b->backend, state);
  *rate = done / seconds;
  print_prefill (b, size, done, seconds);
  return TRUE;
}

/* ---- a prompt while 8 conversations decode ---- */

static guint64
mixed_max_calls (const DcpBenchOptions *o)
{
  return (guint64) (o->mixed + o->chunk - 1) / o->chunk * MIXED_CALLS_PER_CHUNK;
}

/* The 8 decoders get a token in every call; a call carries the next chunk of the prompt too
 * when the time share allows it, as the scheduler's step does (dcp-scheduler.c). */
static gboolean
run_mixed_timed (Bench *b, DcpSeqState **decoders, DcpSeqState *prompt_state,
                 const guint32 *prompt, DcpTimeShare *share, guint *calls, guint *done,
                 double *seconds, GError **error)
{
  DcpBatchItem items[DCP_BENCH_MIXED_DECODERS + 1];
  guint32 tokens[DCP_BENCH_MIXED_DECODERS];
  gint64 start = g_get_monotonic_time ();
  const guint D = DCP_BENCH_MIXED_DECODERS;
  guint64 max_calls = mixed_max_calls (b->opt);

  *calls = *done = 0;
  *seconds = 0;
  while (*done < b->opt->mixed && *seconds <= b->opt->max_seconds && *calls < max_calls)
    {
      guint n = dcp_time_share_may_prompt (share, TRUE) ? MIN (b->opt->chunk, b->opt->mixed - *done) : 0;
      gint64 t0, t1;

      decode_items (b, decoders, tokens, items, D);
      if (n > 0)
        items[D] = (DcpBatchItem) { prompt_state, prompt + *done, n, DCP_LOGITS_LAST,
                                    b->logits + (gsize) D * b->config.vocab_size, NULL };
      t0 = g_get_monotonic_time ();
      if (!dcp_backend_forward (b->backend, items, n > 0 ? D + 1 : D, error))
        return FALSE;
      t1 = g_get_monotonic_time ();
      dcp_time_share_record (share, t1 - t0, n > 0, TRUE);
      *done += n;
      (*calls)++;
      *seconds = (t1 - start) / 1e6;
    }
  return TRUE;
}

static gboolean
run_mixed (Bench *b, guint context, GError **error)
{
  const guint D = DCP_BENCH_MIXED_DECODERS;
  DcpSeqState *decoders[DCP_BENCH_MIXED_DECODERS] = { NULL };
  DcpSeqState *prompt_state = NULL;
  g_autofree guint32 *prompt = NULL;
  g_autoptr(DcpTimeShare) share =
    dcp_time_share_new (dcp_time_share_policy_permille (DCP_PREFILL_BALANCED));
  guint calls = 0, done = 0;
  guint64 max_calls = mixed_max_calls (b->opt), prompt_calls = 0;
  gint64 call_us = 0, prompt_us = 0;
  double alone_s = 0, seconds = 0, alone_rate, mixed_rate, achieved;
  g_autofree char *stopped = NULL;
  gboolean ok;

  if (b->cost.n_attn > 0 &&
      pool_need (D, (guint64) context + WARMUP_STEPS + b->opt->steps + max_calls) +
      pool_need (1, b->opt->mixed) > b->pool_tokens)
    {
      skip (b, "prefill while 8 decode", "the KV does not fit beside the weights");
      return TRUE;
    }
  prompt = random_tokens (b, b->opt->mixed);
  ok = states_new (b, decoders, D, context, error) &&
       time_decode (b, decoders, D, b->opt->steps, &alone_s, error) &&
       (prompt_state = dcp_backend_state_new (b->backend, error)) != NULL &&
       run_mixed_timed (b, decoders, prompt_state, prompt, share, &calls, &done, &seconds, error);
  states_free (b, decoders, D);
  if (prompt_state != NULL)
    dcp_backend_state_free (b->backend, prompt_state);
  if (!ok)
    return FALSE;
  dcp_time_share_get_totals (share, &call_us, &prompt_us, NULL, &prompt_calls);
  achieved = (double) prompt_us / MAX (call_us, 1);
  alone_rate = D / alone_s;
  mixed_rate = D * calls / seconds;
  if (done < b->opt->mixed)
    stopped = calls >= max_calls ? g_strdup_printf (", stopped at %u calls", calls)
                                 : g_strdup (", stopped at --max-seconds");
  if (b->opt->json)
    {
      JsonBuilder *j = row_begin (b, "mixed");

      row_int (j, "decoders", D);
      row_int (j, "context", context);
      row_int (j, "prompt", b->opt->mixed);
      row_int (j, "prompt_tokens_done", done);
      row_int (j, "chunk", b->opt->chunk);
      row_string (j, "policy", "balanced");
      row_int (j, "calls", calls);
      row_int (j, "prompt_calls", (gint64) prompt_calls);
      row_double (j, "prompt_time_share", achieved);
      row_double (j, "prompt_time_share_target", dcp_time_share_get_permille (share) / 1000.0);
      row_double (j, "seconds", seconds);
      row_double (j, "decode_tokens_per_s_alone", alone_rate);
      row_double (j, "decode_tokens_per_s", mixed_rate);
      row_double (j, "prompt_tokens_per_s", done / seconds);
      row_end (j);
    }
  else
    g_print ("  8 decoders at context %u: %.1f tokens/s alone, %.1f tokens/s (%.1f%%) while a "
             "%u-token prompt is read, balanced policy: %" G_GUINT64_FORMAT " of %u calls carried "
             "a %u-token chunk, %.1f%% of the time (share %.0f%%); %u tokens of it in %.2f s: "
             "%.1f tokens/s%s\n",
             context, alone_rate, mixed_rate, 100 * mixed_rate / alone_rate, b->opt->mixed,
             prompt_calls, calls, b->opt->chunk, 100 * achieved,
             dcp_time_share_get_permille (share) / 10.0, done, seconds, done / seconds,
             stopped != NULL ? stopped : "");
  return TRUE;
}

/* ---- one recipe ---- */

/* The KV pool: what the runs ask for, at most what fits in the free VRAM beside the weights,
 * the sequences' GDN states and the attention workspace. */
static guint64
plan_pool (Bench *b, guint64 free_bytes)
{
  const DcpBenchOptions *o = b->opt;
  DcpkKvLayout layout = { (int) b->config.n_kv_heads, (int) b->config.head_dim,
                          DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 };
  guint64 weights = b->cost.weight_bytes + (guint64) b->config.vocab_size * b->config.hidden_size * 2;
  guint64 want = DCPK_KV_PAGE_TOKENS, fits, workspace, states;
  guint max_states = 1;
  guint mixed_context = o->contexts->len > 0 ? g_array_index (o->contexts, guint, 0) : 1024;

  for (guint i = 0; i < o->batches->len; i++)
    {
      guint n = g_array_index (o->batches, guint, i);

      max_states = MAX (max_states, n);
      for (guint c = 0; c < o->contexts->len; c++)
        want = MAX (want, pool_need (n, (guint64) g_array_index (o->contexts, guint, c) +
                                        WARMUP_STEPS + o->steps));
    }
  for (guint i = 0; i < o->prefill->len; i++)
    want = MAX (want, pool_need (1, g_array_index (o->prefill, guint, i)));
  /* --verify: its largest batch, each state with a step save (about one more GDN state) */
  if (o->verify)
    {
      max_states = MAX (max_states, 2 * DCP_BENCH_VERIFY_BATCH);
      want = MAX (want, pool_need (DCP_BENCH_VERIFY_BATCH,
                                   (guint64) mixed_context +
                                       (WARMUP_STEPS + o->steps) * DCP_BENCH_VERIFY_ROWS));
    }
  if (o->mixed > 0)
    {
      max_states = MAX (max_states, DCP_BENCH_MIXED_DECODERS + 1);
      want = MAX (want, pool_need (DCP_BENCH_MIXED_DECODERS, (guint64) mixed_context + WARMUP_STEPS +
                                   o->steps + mixed_max_calls (o)) + pool_need (1, o->mixed));
    }
  if (b->cost.kv_bytes_per_token == 0)
    return DCPK_KV_PAGE_TOKENS;
  states = (guint64) max_states * b->cost.gdn_state_bytes;
  if (free_bytes < weights + states + RESERVE_BYTES)
    return 0;
  fits = (free_bytes - weights - states - RESERVE_BYTES) / b->cost.kv_bytes_per_token;
  want = MIN (want, fits);
  workspace = dcpk_attention_workspace_bytes (&layout, (int) b->config.n_heads, DCP_BENCH_MAX_BATCH,
                                              (int) dcp_cuda_forward_kv_bucket ((guint) want));
  want = MIN (want, fits - MIN (fits, workspace / b->cost.kv_bytes_per_token + 1));
  return want / DCPK_KV_PAGE_TOKENS * DCPK_KV_PAGE_TOKENS;
}

/* The model's backend: the --model file's weights, or random ones in the recipe's formats. */
static DcpBackend *
new_backend (Bench *b, GError **error)
{
  DcpTensorSource source;

  if (b->file == NULL)
    return dcp_backend_cuda_new_random_recipe (&b->config, b->recipe, g_rand_int (b->rand),
                                               (guint) b->pool_tokens, error);
  source = dcp_model_file_get_source (b->file);
  return dcp_backend_cuda_new (&b->config, &source, (guint) b->pool_tokens, error);
}

static gboolean
run_recipe (Bench *b, GError **error)
{
  const DcpBenchOptions *o = b->opt;
  DcpkDeviceInfo info;
  g_autoptr(GError) local = NULL;
  double rate = 0;

  dcp_model_cost (&b->config, b->recipe, &b->cost);
  if (!dcp_cuda_check (dcpk_device_info (0, &info), "device info", error))
    return FALSE;
  b->pool_tokens = plan_pool (b, info.free_bytes);
  if (b->pool_tokens == 0)
    {
      skip (b, "the whole recipe", "its weights do not fit in the free VRAM");
      return TRUE;
    }
  /* The plan's reserve is an estimate: on running out of memory, try again with half the pool
   * (the combinations that then do not fit say so). */
  while ((b->backend = new_backend (b, &local)) == NULL &&
         g_error_matches (local, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY) &&
         b->pool_tokens >= 2 * DCPK_KV_PAGE_TOKENS)
    {
      g_printerr ("decapybara-bench: recipe %s: %s; again with a KV pool of %" G_GUINT64_FORMAT
                  " tokens\n", dcp_recipe_name (b->recipe), local->message, b->pool_tokens / 2);
      g_clear_error (&local);
      b->pool_tokens = b->pool_tokens / 2 / DCPK_KV_PAGE_TOKENS * DCPK_KV_PAGE_TOKENS;
    }
  if (b->backend == NULL)
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (o->fp8 && !dcp_backend_cuda_set_fp8_activations (DCP_BACKEND_CUDA (b->backend), TRUE, error))
    return FALSE;
  b->step_bytes = dcp_backend_cuda_get_step_bytes (DCP_BACKEND_CUDA (b->backend));
  if (o->json)
    {
      JsonBuilder *j = row_begin (b, "recipe");

      row_int (j, "weight_bytes", (gint64) b->step_bytes);
      row_int (j, "kv_bytes_per_token", (gint64) b->cost.kv_bytes_per_token);
      row_int (j, "gdn_state_bytes", (gint64) b->cost.gdn_state_bytes);
      row_int (j, "kv_pool_tokens", (gint64) b->pool_tokens);
      row_end (j);
    }
  else
    g_print ("\nrecipe %s, %u layers: %.2f GB of matrices read per step; KV %" G_GUINT64_FORMAT
             " bytes per token, GDN states %.1f MB per sequence; KV pool %" G_GUINT64_FORMAT
             " tokens\n", dcp_recipe_name (b->recipe), b->config.n_layers, b->step_bytes / 1e9,
             b->cost.kv_bytes_per_token, b->cost.gdn_state_bytes / 1e6, b->pool_tokens);

  if (o->contexts->len > 0 && !o->json)
    g_print ("  %-7s %-9s %9s %10s %11s %12s %10s %9s\n", "batch", "context", "ms/step",
             "tokens/s", "weights GB", "KV+state GB", "floor ms", "of floor");
  if (o->integrity && !run_sweep (b, error))
    return FALSE;
  for (guint c = 0; c < o->contexts->len; c++)
    for (guint i = 0; i < o->batches->len; i++)
      if (!run_decode (b, g_array_index (o->batches, guint, i), g_array_index (o->contexts, guint, c),
                       error) ||
          (o->integrity &&
           !run_decode_integrity (b, g_array_index (o->batches, guint, i),
                                  g_array_index (o->contexts, guint, c), error)))
        return FALSE;
  if (o->prefill->len > 0 && !o->json)
    g_print ("  %-9s %-9s %9s %10s %10s %10s\n", "prompt", "done", "seconds", "tokens/s",
             "limit s", "of limit");
  for (guint i = 0; i < o->prefill->len; i++)
    if (!run_prefill (b, g_array_index (o->prefill, guint, i), &rate, error))
      return FALSE;
  if (o->verify &&
      !run_verify (b, o->contexts->len > 0 ? g_array_index (o->contexts, guint, 0) : 1024, error))
    return FALSE;
  if (o->mixed > 0 &&
      !run_mixed (b, o->contexts->len > 0 ? g_array_index (o->contexts, guint, 0) : 1024, error))
    return FALSE;
  dcp_bench_integrity_clear (&b->integrity);
  g_clear_object (&b->backend);
  return TRUE;
}

int
main (int argc, char **argv)
{
  g_auto(DcpBenchOptions) opt;
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (42);
  g_autofree float *logits = NULL;
  g_autoptr(DcpModelFile) file = NULL;
  DcpkDeviceInfo info;
  double gbps = 0;

  setlocale (LC_ALL, "");
  if (!dcp_bench_options_parse (&opt, &argc, &argv, &error))
    {
      g_printerr ("decapybara-bench: %s\n", error->message);
      return 2;
    }
  if (!dcp_backend_cuda_available ())
    {
      g_printerr ("decapybara-bench: no CUDA device: nothing to measure\n");
      return 77;
    }
  if (!dcp_cuda_check (dcpk_device_info (0, &info), "device info", &error) ||
      !dcp_cuda_check (dcpk_bandwidth_probe ((size_t) 1 << 30, 10, &gbps), "bandwidth probe", &error))
    {
      g_printerr ("decapybara-bench: %s\n", error->message);
      return 1;
    }
  if (opt.json)
    {
      JsonBuilder *j = row_begin (NULL, "device");

      row_string (j, "name", info.name);
      row_int (j, "free_bytes", (gint64) info.free_bytes);
      row_double (j, "bandwidth_gbps", gbps);
      row_double (j, "matrix_tflops", opt.tflops);
      row_string (j, "activations", opt.fp8 ? "fp8" : "bf16");
      row_end (j);
    }
  else
    g_print ("%s, %.1f GB free; measured bandwidth %.0f GB/s; prefill limit at %.0f TFLOP/s; "
             "prompt activations %s\n"
             "Model: %s. Decode contexts are synthetic: random KV and GDN states, not a prompt "
             "that ran.\n",
             info.name, info.free_bytes / 1e9, gbps, opt.tflops, opt.fp8 ? "fp8" : "bf16",
             opt.model != NULL ? opt.model : "random weights in the 27B's shapes, full width");

  if (opt.model != NULL && !(file = dcp_model_file_open (opt.model, &error)))
    {
      g_printerr ("decapybara-bench: %s\n", error->message);
      return 2;
    }
  logits = g_new (float, (gsize) (DCP_BENCH_MAX_BATCH + 1) *
                         (file != NULL ? dcp_model_file_get_config (file)->vocab_size : 248320));
  /* A model file runs once, in its own formats (the first recipe names the run). */
  for (guint r = 0; r < (file != NULL ? 1 : opt.recipes->len); r++)
    {
      Bench b = { &opt, g_array_index (opt.recipes, DcpRecipe, r) };

      b.file = file;
      if (file != NULL)
        b.config = *dcp_model_file_get_config (file);
      else
        dcp_model_config_27b (&b.config, opt.layers);
      if (opt.yarn)
        dcp_model_config_enable_yarn (&b.config, DCP_ROPE_YARN_FACTOR);
      b.gbps = gbps;
      b.logits = logits;
      b.rand = rand;
      if (!run_recipe (&b, &error))
        {
          g_printerr ("decapybara-bench: recipe %s: %s\n", dcp_recipe_name (b.recipe),
                      error->message);
          dcp_bench_integrity_clear (&b.integrity);
          g_clear_object (&b.backend);
          return 1;
        }
    }
  return 0;
}
