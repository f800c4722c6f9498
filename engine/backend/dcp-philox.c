/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-philox"

#include "config.h"

#include "dcp-philox.h"

#define M0 0xD2511F53u
#define M1 0xCD9E8D57u
#define W0 0x9E3779B9u
#define W1 0xBB67AE85u

void
dcp_philox4x32_10 (const guint32 counter[4], const guint32 key[2], guint32 out[4])
{
  guint32 c[4] = { counter[0], counter[1], counter[2], counter[3] };
  guint32 k0 = key[0], k1 = key[1];

  for (int round = 0; round < 10; round++)
    {
      guint64 p0 = (guint64) M0 * c[0], p1 = (guint64) M1 * c[2];
      guint32 n[4] = { (guint32) (p1 >> 32) ^ c[1] ^ k0, (guint32) p1,
                       (guint32) (p0 >> 32) ^ c[3] ^ k1, (guint32) p0 };

      c[0] = n[0], c[1] = n[1], c[2] = n[2], c[3] = n[3];
      k0 += W0;
      k1 += W1;
    }
  out[0] = c[0], out[1] = c[1], out[2] = c[2], out[3] = c[3];
}

double
dcp_philox_uniform (guint64 seed, guint64 draw)
{
  /* curand_init puts the subsequence in the counter's high half and the seed in the key */
  const guint32 counter[4] = { 0, 0, (guint32) draw, (guint32) (draw >> 32) };
  const guint32 key[2] = { (guint32) seed, (guint32) (seed >> 32) };
  guint32 out[4];

  dcp_philox4x32_10 (counter, key, out);
  return ((double) (out[0] >> 5) * 67108864.0 + (double) (out[1] >> 6)) / 9007199254740992.0;
}
