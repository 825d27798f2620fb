/*
 * baseline.h - a node's reference measurements, to compare later runs with.
 *
 * File format (JSON, written durably with fs_write_durable):
 *   {"format": "grit-health-baseline", "version": 1, "host": "node1",
 *    "threads": 2, "mode": "quick",
 *    "values": {"compute.gemm_gflops": 81.2, "memory.bandwidth": 9.1, ...},
 *    "digests": {"compute.digest": "0123456789abcdef"}}
 * "values" holds the measured value of every result that passed and has a
 * unit; "digests" the bitwise digests of the deterministic kernel outputs
 * (valid only for the same thread count, BLAS build and CPU). A file is the
 * node's own first run, or a cluster median written by a supervisor in the
 * same format. Unknown keys are ignored, so later versions can add fields.
 */
#ifndef GRIT_HEALTH_BASELINE_H
#define GRIT_HEALTH_BASELINE_H

#include "core/error.h"
#include "health/health.h"

#define HEALTH_BASELINE_MAX 32

typedef struct health_baseline {
    int n;
    char names[HEALTH_BASELINE_MAX][48];
    double values[HEALTH_BASELINE_MAX];
    int threads;            /* 0 when unknown */
    char digest[24];        /* "" when none */
    char host[64];
} health_baseline;

/* Reads a baseline file; GRIT_EIO / GRIT_EFORMAT with context. */
grit_err health_baseline_load(health_baseline *b, const char *path);
/* Writes the report's measurements as a baseline, durably. */
grit_err health_baseline_save(const health_report *r, int threads, const char *digest,
                              const char *path);
/* 1 and *out set when the baseline has a value for name, else 0. */
int health_baseline_get(const health_baseline *b, const char *name, double *out);

#endif
