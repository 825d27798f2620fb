/*
 * progress.h - a one-line progress display with rate and ETA.
 *
 * On a terminal the line is redrawn in place (\r); otherwise (logs, CI)
 * one line is printed every `every` updates and at the end, so logs stay
 * readable. Output goes to the FILE given (stderr by convention).
 */
#ifndef GRIT_CORE_PROGRESS_H
#define GRIT_CORE_PROGRESS_H

#include <stdio.h>

typedef struct progress {
    FILE *out;
    long total;
    int tty;
    long every;
    double t0;
} progress;

double now_seconds(void); /* monotonic clock */

/* out NULL: a silent progress (every call a no-op). */
void progress_init(progress *p, FILE *out, long total, long every);
/* done: units finished; text (may be NULL): extra fields shown after the bar. */
void progress_update(progress *p, long done, const char *text);
void progress_finish(progress *p);

/* "1h02m03s" / "4m05s" / "12.3s" into buf. */
void format_duration(char *buf, size_t cap, double seconds);

#endif
