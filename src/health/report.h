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
 *    "failures": [{"name": "...", "reason": "..."}]}
 * measured/threshold are null when not numeric (or infinite, e.g. an
 * unlimited rlimit); op is "<=", ">=" or null.
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
