/*
 * plot.h - a line chart as a standalone SVG file (no fonts or scripts needed to view
 * it): one or more series of (x, y) points, axes with rounded tick values, a legend.
 * Used by `grit eval --all` for a metric per checkpoint step. Written durably
 * (core/fsutil.h); non-finite points are skipped.
 */
#ifndef GRIT_EVAL_PLOT_H
#define GRIT_EVAL_PLOT_H

#include "core/error.h"

typedef struct plot_series {
    const char *name;
    const double *x, *y;
    int n;
} plot_series;

grit_err plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const plot_series *s, int ns);

#endif
