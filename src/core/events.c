/* events.c - append-only JSON-lines event log (see events.h). */
#include "core/events.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

grit_err events_open(events *ev, const char *path)
{
    ev->f = fopen(path, "a");
    if (!ev->f)
        return grit_errf(GRIT_EIO, "%s: cannot open: %s", path, strerror(errno));
    return GRIT_OK;
}

grit_err events_emit(events *ev, const char *event, json_t *fields)
{
    if (!ev || !ev->f) {
        json_decref(fields);
        return GRIT_OK;
    }
    json_t *o = json_pack("{s:f,s:s}", "ts", wall_seconds(), "event", event);
    if (fields)
        json_object_update(o, fields);
    json_decref(fields);
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!line)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    int bad = fprintf(ev->f, "%s\n", line) < 0 || fflush(ev->f) != 0 || fsync(fileno(ev->f)) != 0;
    free(line);
    return bad ? grit_errf(GRIT_EIO, "events.jsonl: write failed: %s", strerror(errno)) : GRIT_OK;
}

void events_close(events *ev)
{
    if (ev && ev->f) {
        fclose(ev->f);
        ev->f = NULL;
    }
}
