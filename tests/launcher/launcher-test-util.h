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

G_END_DECLS
