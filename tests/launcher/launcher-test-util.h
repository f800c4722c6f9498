/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The head of a .mcapy file (header + metadata, no tensors), as the launcher reads it: the real
 * 27B config from tests/model, the given component sizes and an accuracy section. */
typedef struct {
  guint64 text, embedding, lm_head, mtp, vision, file;
  gboolean with_accuracy;
  gsize padding;              /* extra metadata bytes (a long chat template) */
} TestHead;

GBytes *test_head_build (const TestHead *head);
/* Writes it to dir/name; returns the path. */
char   *test_head_write (const char *dir, const char *name, const TestHead *head);
/* A seeded random head: sizes in the 27B's range. */
void    test_head_random (TestHead *head, GRand *rand);

/* The head of a drafter .mcapy file: the "drafter" member of docs/FORMAT.md and the drafter's
 * own config and sizes. */
typedef struct {
  const char *architecture; /* the target's: "qwen3_5" */
  guint hidden_size, vocab_size, target_layers;
  guint layer_ids[8], n_layer_ids;
  const char *target_name; /* or NULL: "" */
  double mean_accepted;    /* < 0: "acceptance": null */
  guint block_size;
  guint layers, kv_heads, head_dim; /* its own */
  guint64 weights;                  /* sizes.gpu_weights */
} TestDrafter;

/* A drafter for the 27B config of tests/model (hidden 5120, vocabulary 248320, 64 layers). */
void test_drafter_for_27b (TestDrafter *drafter);
GBytes *test_drafter_build (const TestDrafter *drafter);
char *test_drafter_write (const char *dir, const char *name, const TestDrafter *drafter);

G_END_DECLS
