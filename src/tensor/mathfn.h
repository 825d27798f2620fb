/*
 * mathfn.h - branch-free float math that the compiler vectorizes.
 *
 * glibc's expf/erff are scalar calls that gcc will not vectorize without
 * -ffast-math, and the softmax over a 50k vocabulary and GELU over every
 * MLP activation call them hundreds of millions of times per step. These
 * versions are written so loops calling them vectorize (AVX2: 8 lanes, AVX-512:
 * 16). Without AVX-512's masks gcc vectorizes their clamps only when it may
 * evaluate both sides of a select, so the build passes -fno-trapping-math
 * (CMakeLists.txt; without it every such loop ran scalar on AVX2 CPUs):
 *   mf_exp:  Cody-Waite reduction + degree-7 polynomial; <= 2 ulp on
 *            [-87, 88]; inputs below -87 give exp(-87) ~ 1.6e-38, not 0.
 *   mf_erfc: Chebyshev-fitted form (Numerical Recipes' erfcc coefficients,
 *            1.2e-7 in exact arithmetic); in float, relative error <= 5e-7
 *            for z <= 2, growing to 1e-5 at z = 9 (erfc ~ 1e-37) from the
 *            rounding of -z*z: GELU's absolute error stays below 1e-7.
 * They are deterministic: same input, same output, on every thread.
 */
#ifndef GRIT_TENSOR_MATHFN_H
#define GRIT_TENSOR_MATHFN_H

#include <stdint.h>
#include <string.h>

static inline float mf_exp(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float magic = 12582912.0f; /* 1.5 * 2^23: rounds to nearest int */
    float n = (x * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* erfc(z) for z >= 0. */
static inline float mf_erfc_pos(float z)
{
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * mf_exp(-z * z + p);
}

static inline float mf_tanh(float x)
{
    /* tanh(x) = 1 - 2 / (exp(2x) + 1); saturates cleanly at the clamp. */
    return 1.0f - 2.0f / (mf_exp(2.0f * x) + 1.0f);
}

/* The sum of exp(row[j] - mx) over n values (a simd reduction); with keep, each row[j] is
 * replaced by its exponential on the way. The softmax sum of the cross-entropy, whole and
 * vocabulary-parallel (ops.c, ops_tp.c). Inlined, so each caller's loop vectorizes in its
 * own OpenMP body. */
static inline __attribute__((always_inline)) float mf_exp_sum(float *row, int n, float mx,
                                                              int keep)
{
    float s = 0.0f;
    if (keep) {
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < n; j++) {
            float e = mf_exp(row[j] - mx);
            row[j] = e;
            s += e;
        }
    } else {
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < n; j++)
            s += mf_exp(row[j] - mx);
    }
    return s;
}

#endif
