/*
 * report.h - rendering a health_report: a human table and JSON.
 *
 * JSON (format "grit-health", version 1):
 *   {"format": "grit-health", "version": 1, "host": "n1", "mode": "quick",
 *    "healthy": true, "exit_code": 0, "duration_s": 2.1, "threads": 2,
 *    "digest": "0123456789abcdef",
 *    "checks": [{"name": "compute.gemm_kat", "family": "compute",
 *                "verdict": "pass", "measured": 0.012, "threshold": 1.0,
 *                "op": "<=", "unit": "x bound", "reason": "...",
 *                "seconds": 0.4}, ...],
 *    "failures": [{"name": "...", "reason": "..."}],
 *    "ranks": 1,
 *    "network": {"ranks": 3, "hosts": ["n1", "n2", "n3"],
 *                "allreduce": [{"bytes": 8, "time_us": 4.3, "algbw_gbps": 0.002,
 *                               "busbw_gbps": 0.002, "correct": true}, ...],
 *                "pair_bytes": 8388608, "pair_rounds": 3,
 *                "pairs": [{"a": 0, "b": 1, "latency_us": 1.3, "gbps": 28.1}, ...]}}
 * measured/threshold are null when not numeric (or infinite, e.g. an
 * unlimited rlimit); op is "<=", ">=" or null. verdict is "pass", "skip",
 * "fail", "error" or "warn" (passed, with something worth a look; not in
 * failures). "network" is present only when the check ran across MPI ranks;
 * under MPI, rank 0's checks include other ranks' bad ones as "rank<N>.<check>".
 * Ownership: health_report_json returns a new reference (json_decref it).
 */
#ifndef GRIT_HEALTH_REPORT_H
#define GRIT_HEALTH_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "health/health.h"

json_t *health_report_json(const health_report *r);

/* One line per result, a summary line at the end; ANSI colours when color. */
void health_report_print(const health_report *r, FILE *f, int color);

#endif
