/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"

G_BEGIN_DECLS

/* Tests only: a backend that passes every call to another one (the CPU backend) and fails the
 * calls it is told to, as a device would, so that the scheduler's error paths can be run. */
#define FAULTY_TYPE_BACKEND (faulty_backend_get_type ())
G_DECLARE_FINAL_TYPE (FaultyBackend, faulty_backend, FAULTY, BACKEND, DcpBackend)

typedef enum {
  FAULT_STATE_SAVE,
  FAULT_SET_PAGES,
  FAULT_COPY_PAGE,
  FAULT_N,
} Fault;

/* inner: the backend that does the work (a reference is taken). */
DcpBackend *faulty_backend_new   (DcpBackend    *inner);
/* The n-th call of this kind from now on fails (1: the next one); 0: none does. */
void        faulty_backend_fail  (FaultyBackend *self,
                                  Fault          fault,
                                  guint          n);
/* Calls of this kind so far, failed ones included. */
guint       faulty_backend_calls (FaultyBackend *self,
                                  Fault          fault);

G_END_DECLS
