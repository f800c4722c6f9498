/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "dcp-image-decode.h"
#include "golden-data.h"

GArray *
golden_ids (JsonObject *o, const char *member)
{
  JsonArray *a = json_object_get_array_member (o, member);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint32));

  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      guint32 id = (guint32) json_array_get_int_element (a, i);
      g_array_append_val (ids, id);
    }
  return ids;
}

char *
vision_golden_path (const char *file)
{
  return g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small", "golden", file,
                                NULL);
}

void
vision_golden_config (DcpCheckpoint *checkpoint, DcpVisionConfig *config)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "models", "vision-small",
                                                 "preprocessor_config.json", NULL);
  g_autoptr(JsonParser) pre = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_file (pre, path, &error);
  g_assert_no_error (error);
  dcp_vision_config_from_json (config, dcp_checkpoint_get_config_json (checkpoint),
                               json_parser_get_root (pre), &error);
  g_assert_no_error (error);
}

JsonParser *
vision_golden_info (void)
{
  g_autofree char *path = vision_golden_path ("vision.json");
  JsonParser *info = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_file (info, path, &error);
  g_assert_no_error (error);
  return info;
}

float *
vision_golden_patches (const DcpVisionConfig *config, const char *name, guint *width, guint *height,
                       DcpVisionGrid *grid)
{
  g_autofree char *png_name = g_strconcat (name, ".png", NULL);
  g_autofree char *png_path = vision_golden_path (png_name);
  g_autoptr(GError) error = NULL;
  g_autofree char *png = NULL;
  g_autofree guint8 *rgb = NULL;
  gsize len = 0;
  float *patches;

  g_file_get_contents (png_path, &png, &len, &error);
  g_assert_no_error (error);
  rgb = dcp_image_decode_rgb (name, (const guint8 *) png, len, width, height, &error);
  g_assert_no_error (error);
  patches = dcp_vision_patches (config, rgb, *width, *height, (gsize) *width * 3, grid, &error);
  g_assert_no_error (error);
  return patches;
}
