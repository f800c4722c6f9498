/* SPDX-License-Identifier: MIT */
/* The integrity monitor over the vision tower's weights in RAM (the CPU tower of --vision, on
 * the tiny vision model's file): weight_fault_check_tower, with the bit flipped where the
 * tower's matrices point (the file's mapping) and in a copy given to the tower's restore (how
 * tests/gpu/test-integrity-cuda.c hits the CUDA tower's VRAM). */
#include "weight-fault.h"

static DcpModelSource *model;
static DcpBackend *backend;
static DcpPromptVision *vision;

/* A bit flipped in the file's mapping, which the tower's matrices point at. */
static void
test_flip_in_mapping (void)
{
  weight_fault_check_tower (backend, model, vision, FALSE, 0);
}

/* A bit flipped in a copy the tower was given, as in VRAM on CUDA. */
static void
test_flip_in_copy (void)
{
  weight_fault_check_tower (backend, model, vision, TRUE, 0);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  backend = weight_fault_open_cpu ("DECAPYBARA_TINY_VISION_MODEL", &model);
  vision = dcp_prompt_vision_new (model, backend, 1, &error);
  g_assert_no_error (error);
  g_test_add_func ("/integrity/cpu/vision-tower-flip", test_flip_in_mapping);
  g_test_add_func ("/integrity/cpu/vision-tower-flip-copy", test_flip_in_copy);
  status = g_test_run ();
  dcp_prompt_vision_free (vision);
  g_object_unref (backend);
  dcp_model_source_free (model);
  return status;
}
