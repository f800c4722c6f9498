/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-vision-preprocess"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-vision-preprocess.h"

gboolean
dcp_vision_target_size (const DcpVisionConfig *c, guint width, guint height, guint *out_width,
                        guint *out_height, GError **error)
{
  double factor = (double) c->patch_size * c->merge_size, h = height, w = width;
  double h_bar, w_bar;

  g_return_val_if_fail (width > 0 && height > 0, FALSE);

  if (MAX (h, w) / MIN (h, w) > 200)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "the image is %ux%u pixels: its aspect ratio is over 200", width, height);
      return FALSE;
    }
  /* nearbyint rounds ties to even, as Python's round does. */
  h_bar = nearbyint (h / factor) * factor;
  w_bar = nearbyint (w / factor) * factor;
  if (h_bar * w_bar > (double) c->max_pixels)
    {
      double beta = sqrt (h * w / (double) c->max_pixels);

      h_bar = MAX (factor, floor (h / beta / factor) * factor);
      w_bar = MAX (factor, floor (w / beta / factor) * factor);
    }
  else if (h_bar * w_bar < (double) c->min_pixels)
    {
      double beta = sqrt ((double) c->min_pixels / (h * w));

      h_bar = ceil (h * beta / factor) * factor;
      w_bar = ceil (w * beta / factor) * factor;
    }
  *out_width = (guint) w_bar;
  *out_height = (guint) h_bar;
  return TRUE;
}

/* Pillow's resampling (libImaging/Resample.c), restated: weights of the bicubic kernel with
 * a = -0.5, normalised per output pixel in double, then fixed point with 22 fraction bits. */
#define PRECISION_BITS (32 - 8 - 2)

static double
bicubic (double x)
{
  const double a = -0.5;

  x = fabs (x);
  if (x < 1.0)
    return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0)
    return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

/* Per output pixel: its first input pixel, how many, and ksize fixed-point weights. */
static guint
coefficients (guint in_size, guint out_size, int **bounds_out, gint32 **weights_out)
{
  double scale = (double) in_size / out_size, filter_scale = MAX (scale, 1.0);
  double support = 2.0 * filter_scale;
  guint ksize = (guint) ceil (support) * 2 + 1;
  int *bounds = g_new (int, 2 * out_size);
  gint32 *weights = g_new0 (gint32, (gsize) out_size * ksize);
  g_autofree double *k = g_new (double, ksize);

  for (guint xx = 0; xx < out_size; xx++)
    {
      double center = (xx + 0.5) * scale, sum = 0.0;
      int xmin = (int) (center - support + 0.5), xmax = (int) (center + support + 0.5);

      xmin = MAX (xmin, 0);
      xmax = MIN (xmax, (int) in_size) - xmin;
      for (int x = 0; x < xmax; x++)
        {
          k[x] = bicubic ((x + xmin - center + 0.5) / filter_scale);
          sum += k[x];
        }
      for (int x = 0; x < xmax; x++)
        {
          double v = sum != 0.0 ? k[x] / sum : k[x];

          weights[(gsize) xx * ksize + x] =
              (gint32) (v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
        }
      bounds[2 * xx] = xmin;
      bounds[2 * xx + 1] = xmax;
    }
  *bounds_out = bounds;
  *weights_out = weights;
  return ksize;
}

static guint8
clip8 (gint64 v)
{
  if (v >= (gint64) 1 << PRECISION_BITS << 8)
    return 255;
  if (v <= 0)
    return 0;
  return (guint8) (v >> PRECISION_BITS);
}

guint8 *
dcp_vision_resize_rgb (const guint8 *rgb, guint width, guint height, gsize stride, guint out_width,
                       guint out_height)
{
  g_autofree int *hb = NULL, *vb = NULL;
  g_autofree gint32 *hw = NULL, *vw = NULL;
  guint hk = coefficients (width, out_width, &hb, &hw);
  guint vk = coefficients (height, out_height, &vb, &vw);
  int first = vb[0], last = vb[2 * (out_height - 1)] + vb[2 * (out_height - 1) + 1];
  g_autofree guint8 *tmp = NULL;
  const guint8 *src = rgb + (gsize) first * stride;
  gsize src_stride = stride;
  guint8 *out = g_new (guint8, (gsize) out_width * out_height * 3);

  /* Horizontal pass over the rows the vertical one reads. */
  if (out_width != width)
    {
      tmp = g_new (guint8, (gsize) (last - first) * out_width * 3);
      for (int y = 0; y < last - first; y++)
        for (guint xx = 0; xx < out_width; xx++)
          for (guint ch = 0; ch < 3; ch++)
            {
              gint64 ss = 1 << (PRECISION_BITS - 1);
              const gint32 *k = hw + (gsize) xx * hk;

              for (int x = 0; x < hb[2 * xx + 1]; x++)
                ss += (gint64) src[(gsize) y * stride + (gsize) (x + hb[2 * xx]) * 3 + ch] * k[x];
              tmp[((gsize) y * out_width + xx) * 3 + ch] = clip8 (ss);
            }
      src = tmp;
      src_stride = (gsize) out_width * 3;
    }
  if (out_height == height)
    {
      for (guint y = 0; y < out_height; y++)
        memcpy (out + (gsize) y * out_width * 3, src + (gsize) y * src_stride,
                (gsize) out_width * 3);
      return out;
    }
  for (guint yy = 0; yy < out_height; yy++)
    for (guint x = 0; x < out_width * 3; x++)
      {
        gint64 ss = 1 << (PRECISION_BITS - 1);
        const gint32 *k = vw + (gsize) yy * vk;

        for (int y = 0; y < vb[2 * yy + 1]; y++)
          ss += (gint64) src[(gsize) (y + vb[2 * yy] - first) * src_stride + x] * k[y];
        out[(gsize) yy * out_width * 3 + x] = clip8 (ss);
      }
  return out;
}

guint
dcp_vision_patch_width (const DcpVisionConfig *c)
{
  return c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
}

void
dcp_vision_patch_cell (const DcpVisionConfig *c, const DcpVisionGrid *g, guint index, guint *row,
                       guint *col)
{
  guint m = c->merge_size, blocks_across = g->w / m;

  *row = index / (m * m * blocks_across) * m + index / m % m;
  *col = index / (m * m) % blocks_across * m + index % m;
}

void
dcp_vision_position_taps (const DcpVisionConfig *c, const DcpVisionGrid *g, guint row, guint col,
                          guint taps[4], float weights[4])
{
  guint side = c->grid_side, lo[2], hi[2];
  float src[2], frac[2];

  src[0] = (float) row * (float) (side - 1) / (float) MAX (g->h - 1, 1);
  src[1] = (float) col * (float) (side - 1) / (float) MAX (g->w - 1, 1);
  for (int a = 0; a < 2; a++)
    {
      float f = floorf (src[a]);

      frac[a] = src[a] - f;
      lo[a] = MIN ((guint) f, side - 1);
      hi[a] = MIN ((guint) f + 1, side - 1);
    }
  taps[0] = lo[0] * side + lo[1];
  taps[1] = lo[0] * side + hi[1];
  taps[2] = hi[0] * side + lo[1];
  taps[3] = hi[0] * side + hi[1];
  weights[0] = (1 - frac[0]) * (1 - frac[1]);
  weights[1] = (1 - frac[0]) * frac[1];
  weights[2] = frac[0] * (1 - frac[1]);
  weights[3] = frac[0] * frac[1];
}

float *
dcp_vision_patches (const DcpVisionConfig *c, const guint8 *rgb, guint width, guint height,
                    gsize stride, DcpVisionGrid *grid, GError **error)
{
  guint out_w, out_h, p = c->patch_size, m = c->merge_size, pw = dcp_vision_patch_width (c);
  g_autofree guint8 *resized = NULL;
  const guint8 *px = rgb;
  gsize px_stride = stride;
  float *patches;
  guint row = 0;

  g_return_val_if_fail (c->in_channels == 3, NULL);

  if (!dcp_vision_target_size (c, width, height, &out_w, &out_h, error))
    return NULL;
  if (out_w != width || out_h != height)
    {
      px = resized = dcp_vision_resize_rgb (rgb, width, height, stride, out_w, out_h);
      px_stride = (gsize) out_w * 3;
    }
  grid->t = 1;
  grid->h = out_h / p;
  grid->w = out_w / p;
  patches = g_new (float, (gsize) grid->h * grid->w * pw);
  for (guint by = 0; by < grid->h / m; by++)
    for (guint bx = 0; bx < grid->w / m; bx++)
      for (guint iy = 0; iy < m; iy++)
        for (guint ix = 0; ix < m; ix++, row++)
          {
            guint y0 = (by * m + iy) * p, x0 = (bx * m + ix) * p;
            float *dst = patches + (gsize) row * pw;

            for (guint ch = 0; ch < 3; ch++)
              for (guint t = 0; t < c->temporal_patch_size; t++)
                for (guint y = 0; y < p; y++)
                  for (guint x = 0; x < p; x++)
                    {
                      float v = px[(gsize) (y0 + y) * px_stride + (gsize) (x0 + x) * 3 + ch] *
                                (1.0f / 255.0f);

                      *dst++ = (v - c->image_mean[ch]) / c->image_std[ch];
                    }
          }
  return patches;
}
