/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-costs.h"
#include "dcp-drafter.h"

G_BEGIN_DECLS

/* What speculative decoding costs and gives with the chosen model, settings and paired drafter:
 * which speculator Load server passes, the drafter's VRAM, and the expected speed of one
 * conversation with and without speculation. Bandwidth model, as dcp-costs.c's: a verify step
 * reads the weights once for all its rows (anchor + drafts) plus what drafting reads (the MTP
 * head once per draft, or the drafter's weights and KV once); its time is that read's times
 * dcp_speculation_verify_factor (rows), what a verify step of that many rows measured against
 * a 1-row step (the multi-row GEMVs are not bandwidth-bound).
 *   tokens/s with = (1 + expected accepted drafts) / verify step time. */

/* Acceptance estimates where nothing was measured (docs/LAUNCHER.md says where they come from):
 * the chance that each further draft is accepted, given the one before was. */
#define DCP_SPECULATION_RATE_MTP 0.7
#define DCP_SPECULATION_RATE_NGRAM 0.3
/* A DFlash drafter without a measurement: drafts accepted per step with a 16-token block. */
#define DCP_SPECULATION_DFLASH_ACCEPTED 3.0

typedef struct {
  DcpSpeculator speculator; /* what the engine is started with */
  gboolean fell_back;       /* the settings asked for mtp/dflash and got less (no drafter / head) */
  guint drafts;             /* drafts per verify step (the fixed length, or the default); with
                               chosen, the most a step verifies */
  gboolean chosen;          /* a DFlash drafter's lengths chosen by confidence (draft length 0):
                               expected_accepted is its mean accepted length as it is */
  double expected_accepted; /* drafts accepted per step */
  gboolean measured;        /* from the drafter file's acceptance, else an estimate */
  guint64 drafter_weight_bytes;     /* VRAM the drafter adds: its weights */
  guint64 drafter_kv_bytes;         /* and its context for every token of the KV pool (the
                                       plan's drafter_context) */
  guint64 vram_total;               /* the plan's total, the drafter's included */
  guint64 vram_budget;              /* what the engine may use (free VRAM less keep-free) */
  gboolean fits;                    /* vram_total within vram_budget */
  guint64 context_per_conversation; /* the plan's, with the drafter's VRAM kept out of it */
  guint64 step_bytes, verify_bytes; /* one conversation at DCP_COSTS_SHORT_CONTEXT tokens */
  double tokens_per_s_without;      /* one conversation at DCP_COSTS_SHORT_CONTEXT; 0 = unknown */
  double tokens_per_s_with;
} DcpSpeculationCosts;

/* The speculator Load server passes: "mtp" and "dflash" both ask for speculation, which is the
 * paired drafter (dflash) when there is one, else the model's MTP head, else off. "ngram" and
 * "off" are kept. model may be NULL (its head unknown: mtp is kept). */
DcpSpeculator dcp_speculation_resolve (const DcpSettings *settings, const DcpModelMeta *model,
                                       const DcpDrafterInfo *drafter, gboolean *fell_back);
/* A verify step of rows rows (1 + drafts) against a 1-row decode step, as measured on the H200
 * (docs/PERFORMANCE.md "Speculative verify steps on the GPU": 64 layers, medium recipe, batch 1:
 * 2 rows 1.81x, 4 rows 1.82x, 9 rows 2.15x, 16 rows 2.19x), linear between the measured
 * points. Used for every GPU until one is measured there. */
double dcp_speculation_verify_factor (guint rows);
/* The speculator's name as the settings table writes it ("dflash"). */
char *dcp_speculation_name (DcpSpeculator speculator);
/* Drafts accepted per step with `drafts` drafts when each is accepted with `rate` after the one
 * before: rate + rate^2 + ... + rate^drafts. */
double dcp_speculation_expected (double rate, guint drafts);
/* The per-draft rate that gives `accepted` drafts per step with `drafts` drafts (the inverse of
 * dcp_speculation_expected). */
double dcp_speculation_rate_for (double accepted, guint drafts);
/* FALSE when there is no model or no plan (costs says why). */
gboolean dcp_speculation_costs_compute (DcpSpeculationCosts *out, const DcpModelMeta *model,
                                        const DcpSettings *settings, const DcpDrafterInfo *drafter,
                                        const DcpDeviceReport *device, guint64 plan_vram_bytes);

G_END_DECLS
