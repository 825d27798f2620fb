/*
 * watch.c - `grit rate watch`: a batch for every new checkpoint of a training run (see
 * rate.h). The newest checkpoint of RUN/ckpt that verifies (ckpt_find: a step still being
 * written has no manifest and is never a candidate; a corrupt one is skipped, said on the
 * log) is answered unless the database already holds answers from that step folder, so a
 * watcher restarted after a crash neither repeats nor skips a checkpoint. Only the newest
 * is batched, as in a daily human evaluation: steps that came and went between two polls
 * are not rated.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/ckpt.h"
#include "ckpt/store.h"
#include "rate/rate_internal.h"

static void rejected(void *ctx, const char *dir, const char *why, int remote_next)
{
    (void)remote_next;
    const rate_watch_opts *o = ctx;
    if (o->batch.log)
        fprintf(o->batch.log, "grit rate watch: skipping %s: %s\n", dir, why);
}

/* Whether any answer of the database came from the step folder ck. */
static grit_err batched(rate_db *d, const char *ck, int *yes)
{
    sqlite3_stmt *s;
    pthread_mutex_lock(&d->mu);
    grit_err rc = rate__prep(d, &s, "SELECT 1 FROM answers WHERE checkpoint = ? LIMIT 1", "s", ck);
    if (rc == GRIT_OK) {
        int r = sqlite3_step(s);
        *yes = r == SQLITE_ROW;
        if (r != SQLITE_ROW && r != SQLITE_DONE)
            rc = rate__dberr(d, "SELECT answers by checkpoint");
        sqlite3_finalize(s);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* One poll: *made = the batch id made (0 none). */
static grit_err poll_once(rate_db *d, const rate_watch_opts *o, const char *root, int64_t *made)
{
    *made = 0;
    store *st = NULL;
    char sub[256], ck[PATH_MAX + 300];
    grit_err rc = store_open_posix(root, &st);
    if (rc != GRIT_OK)
        return rc;
    rc = ckpt_find(st, sub, sizeof sub, rejected, (void *)o);
    store_close(st);
    if (rc == GRIT_ENOTFOUND || rc == GRIT_EFORMAT) { /* none yet, or none verifies yet */
        if (o->batch.log)
            fprintf(o->batch.log, "grit rate watch: %s: %s\n", root, grit_errmsg());
        return GRIT_OK;
    }
    if (rc != GRIT_OK)
        return rc;
    snprintf(ck, sizeof ck, "%s/%s", root, sub);
    int yes = 0;
    if ((rc = batched(d, ck, &yes)) != GRIT_OK || yes)
        return rc;
    const char *cks[2] = {ck, o->baseline};
    rate_batch_opts b = o->batch;
    b.checkpoints = cks;
    b.ncheckpoints = o->baseline ? 2 : 1;
    int n = 0;
    if ((rc = rate_batch(d, &b, made, &n)) != GRIT_OK)
        return rc;
    if (o->batch.log)
        fprintf(o->batch.log, "grit rate watch: batch %lld: %d answers from %s%s%s\n",
                (long long)*made, n, ck, o->baseline ? " and the baseline " : "",
                o->baseline ? o->baseline : "");
    if (o->webhook) {
        char text[PATH_MAX + 1024];
        snprintf(text, sizeof text, "grit rate: batch %lld is ready: %d answers from new "
                 "checkpoint %s%s to rate in %s", (long long)*made, n, ck,
                 o->baseline ? " (with the baseline)" : "", rate_db_path(d));
        if (rate_webhook(o->webhook, text) != GRIT_OK && o->batch.log) /* the batch stands */
            fprintf(o->batch.log, "grit rate watch: %s\n", grit_errmsg());
    }
    return GRIT_OK;
}

grit_err rate_watch(rate_db *d, const rate_watch_opts *o, int *batches)
{
    char run[PATH_MAX], root[PATH_MAX + 8];
    *batches = 0;
    if (!realpath(o->run, run))
        return grit_errf(GRIT_ENOTFOUND, "%s: %s (expected a training run directory)", o->run,
                         strerror(errno));
    snprintf(root, sizeof root, "%s/ckpt", run);
    sigset_t set; /* SIGINT/SIGTERM end the wait between polls (the caller blocked them) */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    for (;;) {
        int64_t made;
        grit_err rc = poll_once(d, o, root, &made);
        if (rc != GRIT_OK)
            return rc;
        *batches += made > 0;
        if (o->once)
            return GRIT_OK;
        struct timespec ts = {(time_t)o->every, (long)((o->every - (double)(time_t)o->every) * 1e9)};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            if (o->batch.log)
                fprintf(o->batch.log, "grit rate watch: %s, stopping\n",
                        sig == SIGINT ? "SIGINT" : "SIGTERM");
            return GRIT_OK;
        }
    }
}
