/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

/* The Hugging Face token on a request: "Authorization: Bearer TOKEN" while the request's host is
 * the endpoint's (https://huggingface.co or $HF_ENDPOINT), and never after a redirect to another
 * host (Hugging Face sends file bodies to a CDN). Listing a repository, reading a file's head by
 * Range and downloading all go through this, so a private or gated repository works for all
 * three. token NULL or "": nothing is sent. */
void dcp_hf_authorize (SoupMessage *msg,
                       const char  *endpoint,
                       const char  *token);

G_END_DECLS
