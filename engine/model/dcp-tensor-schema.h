/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-model-config.h"
#include "dcp-tensor.h"

G_BEGIN_DECLS

/* The shape a text or MTP tensor must have under a model config (docs/MODEL.md §1.2), by its
 * canonical name (dcp-tensor-names.h). Returns FALSE for names the config says nothing about
 * (vision tensors, unknown names); those are not checked. */
gboolean dcp_tensor_expected_shape (const DcpModelConfig *config,
                                    const char           *canonical_name,
                                    guint64              *shape,
                                    guint                *ndim);

/* Checks a tensor's shape against the config; an error names `what` (the file) and the tensor. */
gboolean dcp_tensor_check_shape    (const DcpModelConfig *config,
                                    const char           *canonical_name,
                                    const guint64        *shape,
                                    guint                 ndim,
                                    const char           *what,
                                    GError              **error);

G_END_DECLS
