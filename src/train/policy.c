/* policy.c - NaN guard and skip-bad-batch (see policy.h). */
#include "train/policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

grit_err policy_init(policy *p, const char *list)
{
    memset(p, 0, sizeof *p);
    if (!list || !*list)
        return GRIT_OK;
    size_t cap = 1;
    for (const char *c = list; *c; c++)
        cap += *c == ',';
    if (!(p->skip = calloc(cap, sizeof *p->skip)))
        return grit_errf(GRIT_ENOMEM, "out of memory");
    for (const char *c = list; *c;) {
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || errno || v < 1 || (*end && *end != ',')) {
            int len = (int)strcspn(c, ",");
            policy_free(p);
            return grit_errf(GRIT_EINVAL, "GRIT_SKIP_STEPS: '%.*s' is not a step number "
                                          "(expected a comma list of steps >= 1)", len, c);
        }
        p->skip[p->nskip++] = v;
        c = *end ? end + 1 : end;
    }
    return GRIT_OK;
}

void policy_free(policy *p)
{
    free(p->skip);
    memset(p, 0, sizeof *p);
}

grit_err policy_guard(emitter *em, events *ev, long step, double loss, double norm)
{
    if (isfinite(loss) && isfinite(norm))
        return GRIT_OK;
    emit_worker_event(em, "nan", step, isfinite(loss) ? "grad_norm" : "loss");
    grit_err rc = grit_errf(GRIT_ENUMERIC, "step %ld: non-finite %s (loss %g, grad norm %g)",
                            step, isfinite(loss) ? "gradient norm" : "loss", loss, norm);
    events_emit(ev, "numeric_error", json_pack("{s:I}", "step", (json_int_t)step));
    return rc;
}

bool policy_skip(const policy *p, emitter *em, events *ev, long step)
{
    for (int i = 0; i < p->nskip; i++)
        if (p->skip[i] == step) {
            events_emit(ev, "batch_skipped", json_pack("{s:I}", "step", (json_int_t)step));
            emit_worker_event(em, "batch_skipped", step, "-");
            return true;
        }
    return false;
}
