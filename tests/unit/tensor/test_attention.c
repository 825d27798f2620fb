/*
 * test_attention.c - the tiled causal attention against a direct double-precision
 * implementation (full T x T matrices), forward and backward, for a length that is
 * not a multiple of the tile and several heads and batches.
 */
#include <stdlib.h>

#include "../check.h"
#include "core/rng.h"
#include "tensor/ops.h"

enum { B = 2, T = 150, H = 3, HD = 16, C = H * HD };

static double P_[T][T];

int main(void)
{
    float *qkv = malloc(sizeof(float) * B * T * 3 * C), *out = malloc(sizeof(float) * B * T * C);
    float *dout = malloc(sizeof(float) * B * T * C), *dqkv = malloc(sizeof(float) * B * T * 3 * C);
    float *lse = malloc(sizeof(float) * B * H * T);
    float *scr = malloc(sizeof(float) * (size_t)op_attention_scratch_floats(T, 8));
    rng_t r;
    rng_seed(&r, 1, 2);
    for (int i = 0; i < B * T * 3 * C; i++)
        qkv[i] = (float)rng_normal(&r);
    for (int i = 0; i < B * T * C; i++)
        dout[i] = (float)rng_normal(&r);
    op_attention_fwd(out, lse, qkv, B, T, H, HD, scr);
    op_attention_bwd(dqkv, dout, out, lse, qkv, B, T, H, HD, scr);

    double scale = 1.0 / sqrt((double)HD), eo = 0, eg = 0, mo = 0, mg = 0;
#define Q(b, t, h, d) qkv[((b) * T + (t)) * 3 * C + (h) * 3 * HD + (d)]
#define K(b, t, h, d) Q(b, t, h, HD + (d))
#define V(b, t, h, d) Q(b, t, h, 2 * HD + (d))
#define DO(b, t, h, d) dout[((b) * T + (t)) * C + (h) * HD + (d)]
#define DQKV(b, t, h, part, d) dqkv[((b) * T + (t)) * 3 * C + (h) * 3 * HD + (part) * HD + (d)]
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            static double dP[T][T], O[T][HD];
            for (int i = 0; i < T; i++) {
                double mx = -1e300, s = 0;
                for (int j = 0; j <= i; j++) {
                    double v = 0;
                    for (int d = 0; d < HD; d++)
                        v += (double)Q(b, i, h, d) * K(b, j, h, d);
                    P_[i][j] = v * scale;
                    mx = P_[i][j] > mx ? P_[i][j] : mx;
                }
                for (int j = 0; j <= i; j++)
                    s += (P_[i][j] = exp(P_[i][j] - mx));
                for (int j = 0; j < T; j++)
                    P_[i][j] = j <= i ? P_[i][j] / s : 0;
                for (int d = 0; d < HD; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += P_[i][j] * V(b, j, h, d);
                    O[i][d] = o;
                    double got = out[(b * T + i) * C + h * HD + d];
                    eo = fmax(eo, fabs(got - o));
                    mo = fmax(mo, fabs(o));
                }
            }
            for (int i = 0; i < T; i++) {
                double D = 0;
                for (int d = 0; d < HD; d++)
                    D += DO(b, i, h, d) * O[i][d];
                for (int j = 0; j <= i; j++) {
                    double v = 0;
                    for (int d = 0; d < HD; d++)
                        v += (double)DO(b, i, h, d) * V(b, j, h, d);
                    dP[i][j] = P_[i][j] * (v - D) * scale;
                }
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < HD; d++) {
                    double q = 0, k = 0, v = 0;
                    for (int j = 0; j <= t; j++)
                        q += dP[t][j] * K(b, j, h, d);
                    for (int i = t; i < T; i++) {
                        k += dP[i][t] * Q(b, i, h, d);
                        v += P_[i][t] * DO(b, i, h, d);
                    }

                    double w[3] = {q, k, v};
                    for (int p = 0; p < 3; p++) {
                        eg = fmax(eg, fabs(DQKV(b, t, h, p, d) - w[p]));
                        mg = fmax(mg, fabs(w[p]));
                    }
                }
        }
    printf("attention: forward error %.3g (max %.3g), backward error %.3g (max %.3g)\n", eo, mo,
           eg, mg);
    CHECK(eo <= 1e-5 * mo);
    CHECK(eg <= 1e-5 * mg);
    free(qkv), free(out), free(dout), free(dqkv), free(lse), free(scr);
    CHECK_DONE();
}
