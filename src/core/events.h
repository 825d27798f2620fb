/*
 * events.h - the run's event log (events.jsonl): one JSON object per line,
 * {"ts": <unix seconds>, "event": "<name>", ...fields}, appended and fsynced
 * per event, so the supervisor and the summary can reconstruct what happened
 * and when (resumes, checkpoint saves and failures, corrupt checkpoints).
 */
#ifndef GRIT_CORE_EVENTS_H
#define GRIT_CORE_EVENTS_H

#include <jansson.h>
#include <stdio.h>

#include "core/error.h"

typedef struct events {
    FILE *f;
} events;

grit_err events_open(events *ev, const char *path);
/* Appends one event; fields (may be NULL) is an object whose reference is stolen.
 * Errors are returned but the event log never stops training by itself. */
grit_err events_emit(events *ev, const char *event, json_t *fields);
void events_close(events *ev);

double wall_seconds(void); /* CLOCK_REALTIME as seconds */

#endif
