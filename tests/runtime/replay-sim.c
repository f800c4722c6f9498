/* SPDX-License-Identifier: MIT */
/* Trace replay of a team of coding agents against the scheduler's memory policies, with a
 * simulated clock and a cost model instead of forward passes (docs/SCHEDULER.md, "Replay").
 *
 *   replay-sim [--agents N] [--scale F] [--seed S] [--gpu 5090|h200|both] [--ram GIB]
 *              [--disk GIB] [--check]
 *
 * Each agent starts with the shared opening (system prompt + tools), then loops: an answer of a
 * few hundred tokens ending in a tool call, a gap while the tool runs (some run in the
 * background for minutes), the tool output appended to its context, until its context passes
 * its target (100K+); now and then the human is away for a long while. --scale multiplies every
 * token count and every memory size (CI runs 0.05 with 6 agents). Both eviction policies replay the same trace; the table gives
 * prompt tokens served and read, time to first token per turn and bytes moved per tier.
 * --check exits 1 when an accounting identity fails (CI). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcp-eviction.h"

/* ---- the machine ---- */

typedef struct {
  const char *name;
  double weight_bytes;       /* streamed once per step */
  double state_bytes;        /* VRAM for KV pool and GDN blocks */
  double kv_per_token;       /* bytes, every attention layer */
  double gdn_bytes;          /* one conversation's recurrent + conv state */
  double hbm_bw;             /* bytes/s achieved */
  double flops;              /* achieved dense FLOP/s in prefill GEMMs */
  double pcie_bw;            /* device <-> pinned RAM, bytes/s */
  double disk_bw;            /* NVMe, bytes/s */
  double ram_bytes, disk_bytes;
  guint max_running;
} Gpu;

#define GIB (1024.0 * 1024.0 * 1024.0)
#define PARAMS 27e9
#define ATTN_WIDTH (16.0 * 24 * 256)   /* attention layers x query heads x head dim */
#define GDN 153944064.0

/* RTX 5090: 32 GiB, 1.79 TB/s; weights of the Small recipe (~15 GiB), KV 8/8; H200: 141 GiB,
 * 4.6 TB/s as measured, weights in the Large recipe (~28 GiB), KV 16/16. Achieved FLOP/s are
 * half of the dense FP8 peak. The state budget is VRAM less weights, activations and context. */
static const Gpu gpus[] = {
  { "RTX 5090", 15 * GIB, 13 * GIB, 33792, GDN, 1.6e12, 2.0e14, 5.0e10, 3.0e9, 64 * GIB, 500 * GIB, 8 },
  { "H200", 28 * GIB, 100 * GIB, 65536, GDN, 4.6e12, 4.9e14, 5.0e10, 3.0e9, 256 * GIB, 500 * GIB, 12 },
};

/* ---- the trace ---- */

typedef struct {
  double gap;                /* idle time before this turn arrives (after the previous answer) */
  guint new_tokens;          /* appended to the context: task, or tool output */
  guint answer_tokens;
  gboolean background;       /* the gap is a background tool call */
} Turn;

typedef struct {
  GArray *turns;             /* Turn */
} Script;

static GArray *
make_trace (guint n_agents, double scale, guint seed, guint opening)
{
  GRand *rand = g_rand_new_with_seed (seed);
  GArray *scripts = g_array_new (FALSE, FALSE, sizeof (Script));

  for (guint a = 0; a < n_agents; a++)
    {
      Script s = { g_array_new (FALSE, FALSE, sizeof (Turn)) };
      guint ctx = opening, target = (guint) (g_rand_double_range (rand, 100e3, 140e3) * scale);
      Turn first = { g_rand_double_range (rand, 0, 20), (guint) (2000 * scale), 0, FALSE };

      first.answer_tokens = (guint) (g_rand_int_range (rand, 150, 800) * scale) + 1;
      g_array_append_val (s.turns, first);
      ctx += first.new_tokens + first.answer_tokens;
      while (ctx < target)
        {
          Turn t = { 0 };
          double r = g_rand_double (rand);

          t.background = r < 0.08;
          if (t.background)
            t.gap = g_rand_double_range (rand, 60, 300);
          else if (r < 0.12)
            t.gap = g_rand_double_range (rand, 300, 1800);   /* the human is away */
          else
            t.gap = g_rand_double_range (rand, 1, 20);
          t.new_tokens = (guint) (g_rand_double_range (rand, 300, 8000) * scale) + 1;
          t.answer_tokens = (guint) (g_rand_int_range (rand, 100, 700) * scale) + 1;
          g_array_append_val (s.turns, t);
          ctx += t.new_tokens + t.answer_tokens;
        }
      g_array_append_val (scripts, s);
    }
  g_rand_free (rand);
  return scripts;
}

/* ---- the simulation ---- */

typedef enum { LOC_NONE, LOC_DEVICE, LOC_RAM, LOC_DISK } Loc;

typedef struct {
  /* the conversation's cached state (after its last answer), or the shared opening's */
  Loc loc;
  double bytes;
  double last_used;
  guint tokens;
  gboolean background, finished;
  /* the agent */
  guint turn;                /* next turn */
  double arrive;             /* of the next or current turn */
  gboolean queued, running, done;
  gboolean preempted;        /* waiting at the head of the queue to resume where it stopped */
  guint prompt_left, answer_left;
  double ready;              /* running: its state is on the device from then on */
  gboolean first_token_seen;
} Agent;

typedef struct {
  double served, read, reused;
  double dev_to_ram, ram_to_dev, ram_to_disk, disk_to_dev;
  double dropped;
  guint preemptions, turns;
  GArray *ttft;              /* double */
  double end;
} Result;

typedef struct {
  const Gpu *gpu;
  DcpEvictionPolicy policy;
  GArray *scripts;
  guint n;                   /* agents; entry n is the opening */
  Agent *ag;
  GQueue queue;              /* agent indices + 1 */
  double t, pcie_free, disk_free;
  double dev_used, ram_used, disk_used;
  Result *res;
  guint chunk;
} Sim;

static double
state_bytes (const Sim *sim, guint tokens)
{
  return tokens * sim->gpu->kv_per_token + sim->gpu->gdn_bytes;
}

static Turn *
turn_of (Sim *sim, guint a)
{
  Script *s = &g_array_index (sim->scripts, Script, a);
  return &g_array_index (s->turns, Turn, sim->ag[a].turn);
}

static guint
queue_pos (Sim *sim, guint a)
{
  guint i = 0;

  for (GList *l = sim->queue.head; l != NULL; l = l->next, i++)
    {
      guint q = GPOINTER_TO_UINT (l->data) - 1;
      if (q == a || (a == sim->n && sim->ag[q].turn == 0))
        return i;
    }
  return DCP_EVICTION_NOT_NEEDED;
}

static void
set_loc (Sim *sim, Agent *e, Loc to)
{
  double *used[] = { NULL, &sim->dev_used, &sim->ram_used, &sim->disk_used };

  if (used[e->loc] != NULL)
    *used[e->loc] -= e->bytes;
  e->loc = to;
  if (used[to] != NULL)
    *used[to] += e->bytes;
}

/* Idle states on loc in eviction order. */
static GArray *
candidates (Sim *sim, Loc loc)
{
  GArray *c = g_array_new (FALSE, FALSE, sizeof (DcpEvictionCandidate));

  for (guint i = 0; i <= sim->n; i++)
    {
      Agent *e = &sim->ag[i];
      DcpEvictionCandidate cand = { GUINT_TO_POINTER (i + 1), (guint64) e->bytes,
                                    (gint64) (e->last_used * 1e6), 0, e->background, e->finished };

      if (e->loc != loc || e->running)
        continue;
      cand.next_use = queue_pos (sim, i);
      g_array_append_val (c, cand);
    }
  dcp_eviction_order (sim->policy, (DcpEvictionCandidate *) c->data, c->len);
  return c;
}

static gboolean
room_on_disk (Sim *sim, double need)
{
  while (sim->disk_used + need > sim->gpu->disk_bytes)
    {
      g_autoptr(GArray) c = candidates (sim, LOC_DISK);
      if (c->len == 0)
        return FALSE;
      set_loc (sim, &sim->ag[GPOINTER_TO_UINT (g_array_index (c, DcpEvictionCandidate, 0).key) - 1], LOC_NONE);
      sim->res->dropped++;
    }
  return TRUE;
}

static gboolean
room_in_ram (Sim *sim, double need)
{
  while (sim->ram_used + need > sim->gpu->ram_bytes)
    {
      g_autoptr(GArray) c = candidates (sim, LOC_RAM);
      DcpEvictionCandidate *v;
      Agent *e;

      if (c->len == 0)
        return FALSE;
      v = &g_array_index (c, DcpEvictionCandidate, 0);
      e = &sim->ag[GPOINTER_TO_UINT (v->key) - 1];
      if (dcp_eviction_keep_on_disk (sim->policy, v, (gint64) (sim->t * 1e6)) && room_on_disk (sim, e->bytes))
        {
          set_loc (sim, e, LOC_DISK);
          sim->res->ram_to_disk += e->bytes;
          sim->disk_free = MAX (sim->disk_free, sim->t) + e->bytes / sim->gpu->disk_bw;
        }
      else
        {
          set_loc (sim, e, LOC_NONE);
          sim->res->dropped++;
        }
    }
  return TRUE;
}

/* Moves one idle device state down (asynchronously, on the PCIe link). */
static gboolean
evict_one (Sim *sim, guint keep)
{
  g_autoptr(GArray) c = candidates (sim, LOC_DEVICE);
  Agent *e = NULL;

  for (guint i = 0; i < c->len && e == NULL; i++)
    if (GPOINTER_TO_UINT (g_array_index (c, DcpEvictionCandidate, i).key) - 1 != keep)
      e = &sim->ag[GPOINTER_TO_UINT (g_array_index (c, DcpEvictionCandidate, i).key) - 1];
  if (e == NULL)
    return FALSE;
  if (room_in_ram (sim, e->bytes))
    {
      set_loc (sim, e, LOC_RAM);
      sim->res->dev_to_ram += e->bytes;
      sim->pcie_free = MAX (sim->pcie_free, sim->t) + e->bytes / sim->gpu->pcie_bw;
    }
  else
    {
      set_loc (sim, e, LOC_NONE);
      sim->res->dropped++;
    }
  return TRUE;
}

static gboolean
device_room (Sim *sim, double need, guint keep)
{
  while (sim->dev_used + need > sim->gpu->state_bytes)
    if (!evict_one (sim, keep))
      return FALSE;
  return TRUE;
}

/* When e's state is back on the device, counting the tier it comes from. */
static double
bring_back (Sim *sim, Agent *e)
{
  double ready = sim->t;

  if (e->loc == LOC_DISK)
    {
      sim->disk_free = MAX (sim->disk_free, sim->t) + e->bytes / sim->gpu->disk_bw;
      ready = sim->disk_free;
      sim->res->disk_to_dev += e->bytes;
    }
  else if (e->loc == LOC_RAM)
    sim->res->ram_to_dev += e->bytes;
  if (e->loc == LOC_DISK || e->loc == LOC_RAM)
    {
      sim->pcie_free = MAX (sim->pcie_free, ready) + e->bytes / sim->gpu->pcie_bw;
      ready = sim->pcie_free;
    }
  return ready;
}

static gboolean
admit (Sim *sim, guint a)
{
  Agent *g = &sim->ag[a], *open = &sim->ag[sim->n];
  Turn *turn = turn_of (sim, a);
  guint total = g->tokens + turn->new_tokens;
  double need = state_bytes (sim, total) - (g->loc == LOC_DEVICE ? g->bytes : 0);

  if (g->preempted)
    {
      /* Back from RAM whole: its prompt and answer go on where they stopped. */
      if (!device_room (sim, g->bytes, a))
        return FALSE;
      g->ready = bring_back (sim, g);
      set_loc (sim, g, LOC_DEVICE);
      g->running = TRUE;
      g->preempted = FALSE;
      return TRUE;
    }
  if (!device_room (sim, need, a))
    return FALSE;
  sim->res->served += total;
  if (g->loc != LOC_NONE)
    {
      g->ready = bring_back (sim, g);
      g->prompt_left = turn->new_tokens;
      sim->res->reused += g->tokens;
    }
  else if (open->loc != LOC_NONE && g->tokens <= open->tokens && open->tokens < total)
    {
      /* A first turn (or one whose state was dropped) resumes from the opening, copied. */
      g->ready = bring_back (sim, open);
      if (open->loc != LOC_DEVICE && device_room (sim, open->bytes, a))
        set_loc (sim, open, LOC_DEVICE);
      open->last_used = sim->t;
      g->prompt_left = total - open->tokens;
      sim->res->reused += open->tokens;
    }
  else
    {
      g->ready = sim->t;
      g->prompt_left = total;
    }
  sim->res->read += g->prompt_left;
  set_loc (sim, g, LOC_NONE);
  g->bytes = state_bytes (sim, total);
  set_loc (sim, g, LOC_DEVICE);
  g->tokens = total;
  g->running = TRUE;
  g->answer_left = turn->answer_tokens;
  g->first_token_seen = FALSE;
  return TRUE;
}

static void
finish_turn (Sim *sim, guint a)
{
  Agent *g = &sim->ag[a];
  Script *s = &g_array_index (sim->scripts, Script, a);

  g->running = FALSE;
  g->last_used = sim->t;
  g->turn++;
  sim->res->turns++;
  if (g->turn == s->turns->len)
    {
      g->done = TRUE;
      g->finished = TRUE;
      g->background = FALSE;
      return;
    }
  g->arrive = sim->t + turn_of (sim, a)->gap;
  g->background = turn_of (sim, a)->background;
}

static void
run_sim (Sim *sim)
{
  GPtrArray *running = g_ptr_array_new ();

  for (;;)
    {
      gboolean all_done = TRUE;
      double next_arrival = INFINITY, bytes, flops, dt, next_ready = INFINITY;
      guint chunk_left = sim->chunk;
      gboolean any = FALSE;

      for (guint a = 0; a < sim->n; a++)
        {
          Agent *g = &sim->ag[a];
          if (g->done)
            continue;
          all_done = FALSE;
          if (!g->queued && !g->running)
            {
              if (g->arrive <= sim->t)
                {
                  g->queued = TRUE;
                  g->background = FALSE;
                  g_queue_push_tail (&sim->queue, GUINT_TO_POINTER (a + 1));
                }
              else
                next_arrival = MIN (next_arrival, g->arrive);
            }
        }
      if (all_done)
        break;
      /* Expired disk states (queue-aware: nothing idle for over an hour on disk). */
      if (sim->policy == DCP_EVICTION_QUEUE_AWARE)
        {
          g_autoptr(GArray) c = candidates (sim, LOC_DISK);
          for (guint i = 0; i < c->len; i++)
            if (!dcp_eviction_keep_on_disk (sim->policy, &g_array_index (c, DcpEvictionCandidate, i), (gint64) (sim->t * 1e6)))
              set_loc (sim, &sim->ag[GPOINTER_TO_UINT (g_array_index (c, DcpEvictionCandidate, i).key) - 1], LOC_NONE);
        }
      while (running->len < sim->gpu->max_running && !g_queue_is_empty (&sim->queue))
        {
          guint a = GPOINTER_TO_UINT (g_queue_peek_head (&sim->queue)) - 1;
          if (!admit (sim, a))
            break;
          g_queue_pop_head (&sim->queue);
          sim->ag[a].queued = FALSE;
          g_ptr_array_add (running, &sim->ag[a]);
        }
      /* One step: a token for every decoding agent, a prompt chunk for the first readers. */
      bytes = sim->gpu->weight_bytes;
      flops = 0;
      for (guint i = 0; i < running->len; i++)
        {
          Agent *g = g_ptr_array_index (running, i);
          guint chunk;

          if (g->ready > sim->t)
            {
              next_ready = MIN (next_ready, g->ready);
              continue;
            }
          if (g->prompt_left == 0)
            {
              any = TRUE;
              bytes += g->tokens * sim->gpu->kv_per_token + 2 * sim->gpu->gdn_bytes;
              flops += 2 * PARAMS + 4 * ATTN_WIDTH * g->tokens;
              continue;
            }
          chunk = MIN (chunk_left, g->prompt_left);
          if (chunk == 0)
            continue;
          any = TRUE;
          chunk_left -= chunk;
          bytes += g->tokens * sim->gpu->kv_per_token + 2 * sim->gpu->gdn_bytes;
          flops += chunk * (2 * PARAMS + 4 * ATTN_WIDTH * (g->tokens - g->prompt_left + chunk / 2.0));
        }
      if (!any)
        {
          sim->t = MIN (next_ready, next_arrival);
          g_assert (isfinite (sim->t));
          continue;
        }
      dt = MAX (bytes / sim->gpu->hbm_bw, flops / sim->gpu->flops);
      chunk_left = sim->chunk;
      sim->t += dt;
      for (guint i = 0; i < running->len;)
        {
          Agent *g = g_ptr_array_index (running, i);
          guint a = g - sim->ag;

          if (g->ready > sim->t - dt)
            {
              i++;
              continue;
            }
          if (g->prompt_left > 0)
            {
              guint chunk = MIN (chunk_left, g->prompt_left);
              chunk_left -= chunk;
              g->prompt_left -= chunk;
              if (g->prompt_left > 0 || chunk == 0)
                {
                  i++;
                  continue;
                }
            }
          if (!g->first_token_seen)
            {
              double ttft = sim->t - g->arrive;
              g_array_append_val (sim->res->ttft, ttft);
              g->first_token_seen = TRUE;
            }
          g->answer_left--;
          g->tokens++;
          set_loc (sim, g, LOC_NONE);
          g->bytes = state_bytes (sim, g->tokens);
          set_loc (sim, g, LOC_DEVICE);
          if (g->answer_left == 0)
            {
              g_ptr_array_remove_index (running, i);
              finish_turn (sim, a);
              continue;
            }
          i++;
        }
      /* Running agents outgrew the pool: idle states leave, then the youngest is preempted. */
      while (sim->dev_used > sim->gpu->state_bytes)
        if (!evict_one (sim, G_MAXUINT))
          {
            Agent *y = g_ptr_array_steal_index (running, running->len - 1);
            guint a = y - sim->ag;
            /* Whole to RAM and back at the front of the queue; nothing is recomputed. */
            set_loc (sim, y, LOC_RAM);
            sim->res->dev_to_ram += y->bytes;
            y->running = FALSE;
            y->queued = TRUE;
            y->preempted = TRUE;
            g_queue_push_head (&sim->queue, GUINT_TO_POINTER (a + 1));
            sim->res->preemptions++;
          }
    }
  sim->res->end = sim->t;
  g_ptr_array_unref (running);
}

static int
compare_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
percentile (GArray *v, double p)
{
  if (v->len == 0)
    return 0;
  qsort (v->data, v->len, sizeof (double), compare_double);
  return g_array_index (v, double, MIN (v->len - 1, (guint) (p * v->len)));
}

static gboolean
replay (const Gpu *gpu, guint n_agents, double scale, guint seed, gboolean check)
{
  guint opening = (guint) (20000 * scale);
  GArray *scripts = make_trace (n_agents, scale, seed, opening);
  Result res[2];
  const char *names[2] = { "queue-aware", "LRU" };
  gboolean ok = TRUE;

  for (int p = 0; p < 2; p++)
    {
      Sim sim = { 0 };
      double sum = 0;

      memset (&res[p], 0, sizeof res[p]);
      res[p].ttft = g_array_new (FALSE, FALSE, sizeof (double));
      sim.gpu = gpu;
      sim.policy = p == 0 ? DCP_EVICTION_QUEUE_AWARE : DCP_EVICTION_LRU;
      sim.scripts = scripts;
      sim.n = n_agents;
      sim.ag = g_new0 (Agent, n_agents + 1);
      sim.res = &res[p];
      sim.chunk = 2048;
      g_queue_init (&sim.queue);
      for (guint a = 0; a < n_agents; a++)
        sim.ag[a].arrive = g_array_index (g_array_index (scripts, Script, a).turns, Turn, 0).gap;
      /* The opening was read once before (the first agent's warm-up); it starts on the device. */
      sim.ag[n_agents].tokens = opening;
      sim.ag[n_agents].bytes = state_bytes (&sim, opening);
      sim.ag[n_agents].done = TRUE;
      set_loc (&sim, &sim.ag[n_agents], LOC_DEVICE);
      run_sim (&sim);
      for (guint i = 0; i < res[p].ttft->len; i++)
        sum += g_array_index (res[p].ttft, double, i);
      g_print ("| %s | %s | %.1f M | %.1f M | %.0f%% | %.2f s | %.2f s | %.2f s | %.1f | %.1f | %.1f | %.1f | %u | %.0f s |\n",
               gpu->name, names[p], res[p].served / 1e6, res[p].read / 1e6,
               100.0 * (1 - res[p].read / res[p].served), sum / MAX (res[p].ttft->len, 1),
               percentile (res[p].ttft, 0.5), percentile (res[p].ttft, 0.95),
               res[p].dev_to_ram / GIB, res[p].ram_to_dev / GIB, res[p].ram_to_disk / GIB,
               res[p].disk_to_dev / GIB, res[p].preemptions, res[p].end);
      if (check && (fabs (res[p].served - res[p].read - res[p].reused) > 0.5 ||
                    res[p].ttft->len != res[p].turns || res[p].read <= 0))
        {
          g_printerr ("accounting failed: served %.0f read %.0f reused %.0f turns %u ttft %u\n",
                      res[p].served, res[p].read, res[p].reused, res[p].turns, res[p].ttft->len);
          ok = FALSE;
        }
      g_array_unref (res[p].ttft);
      g_free (sim.ag);
    }
  for (guint a = 0; a < scripts->len; a++)
    g_array_unref (g_array_index (scripts, Script, a).turns);
  g_array_unref (scripts);
  return ok;
}

int
main (int argc, char **argv)
{
  int agents = 12, seed = 1;
  double scale = 1.0, ram = -1, disk = -1;
  g_autofree char *gpu = NULL;
  gboolean check = FALSE, ok = TRUE;
  GOptionEntry entries[] = {
    { "agents", 0, 0, G_OPTION_ARG_INT, &agents, "Agents in the team (12)", "N" },
    { "scale", 0, 0, G_OPTION_ARG_DOUBLE, &scale, "Multiply every token count (1)", "F" },
    { "seed", 0, 0, G_OPTION_ARG_INT, &seed, "Trace seed (1)", "S" },
    { "gpu", 0, 0, G_OPTION_ARG_STRING, &gpu, "5090, h200 or both (both)", "GPU" },
    { "ram", 0, 0, G_OPTION_ARG_DOUBLE, &ram, "RAM tier in GiB (the GPU's default)", "GIB" },
    { "disk", 0, 0, G_OPTION_ARG_DOUBLE, &disk, "Disk tier in GiB (500)", "GIB" },
    { "check", 0, 0, G_OPTION_ARG_NONE, &check, "Fail on accounting errors", NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- replay a team of coding agents");
  g_autoptr(GError) error = NULL;

  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error) || agents < 1 || scale <= 0)
    {
      g_printerr ("replay-sim: %s\n", error != NULL ? error->message : "--agents and --scale must be positive");
      return 2;
    }
  g_print ("| GPU | policy | prompt served | read | reused | TTFT mean | p50 | p95 | GiB dev->RAM | RAM->dev | RAM->disk | disk->dev | preemptions | sim time |\n");
  g_print ("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (guint g = 0; g < G_N_ELEMENTS (gpus); g++)
    if (gpu == NULL || g_strcmp0 (gpu, "both") == 0 || (g == 0 && g_strcmp0 (gpu, "5090") == 0) ||
        (g == 1 && g_strcmp0 (gpu, "h200") == 0))
      {
        /* A smaller trace on proportionally smaller memories keeps the same pressure. */
        Gpu scaled = gpus[g];

        if (ram >= 0)
          scaled.ram_bytes = ram * GIB;
        if (disk >= 0)
          scaled.disk_bytes = disk * GIB;

        scaled.state_bytes *= scale;
        scaled.gdn_bytes *= scale;
        scaled.ram_bytes *= scale;
        scaled.disk_bytes *= scale;
        ok = replay (&scaled, agents, scale, seed, check) && ok;
      }
  return ok ? 0 : 1;
}
