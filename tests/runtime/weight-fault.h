/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-model-source.h"
#include "dcp-prompt-vision.h"

G_BEGIN_DECLS

/* Tests only, the fault injection of the integrity monitor's tests: flips bit `bit` of one
 * byte in the middle of tensor name's bytes in model's file mapping, which the CPU backend's
 * matrices point at. The mapping is private: the file on disk stays as it is. */
void weight_fault_flip_bit (DcpModelSource *model,
                            const char     *name,
                            guint           bit);

/* The model file that environment variable env names, and the CPU backend over it (one thread);
 * the test's assertions fail when either cannot be opened. */
DcpBackend *weight_fault_open_cpu (const char *env, DcpModelSource **model);

/* The integrity monitor over vision's tower (on backend; model: its file): the tower's tensors
 * join the sweep; bit 6 of a byte mid visual.blocks.0.attn.qkv.weight flipped (in the file's
 * mapping; copy: in the tower's own copy, read from the file, flipped and given to the tower's
 * restore, as VRAM is hit) changes the test image's embeddings, is found by the next sweep,
 * reported and restored from the file; the embeddings are then those before within relative
 * error bar. */
void weight_fault_check_tower (DcpBackend *backend, DcpModelSource *model, DcpPromptVision *vision,
                               gboolean copy, double bar);

G_END_DECLS
