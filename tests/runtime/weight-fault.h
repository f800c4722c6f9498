/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-model-source.h"

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

G_END_DECLS
