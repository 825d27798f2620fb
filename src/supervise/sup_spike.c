/*
 * sup_spike.c - the supervisor's numeric watch: a loss that jumps (a failure: rolled back
 * like a NaN) and a validation loss that jumps (flagged only), both judged by robust
 * statistics over a short window of earlier values (median, 1.4826 x MAD), and the
 * median the hang timeout also uses.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "supervise/sup_internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sup_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int sup_robust_spike(const double *hist, int n, int min, double x, double z, double *med,
                     double *rz)
{
    double v[32], dev[32], m = NAN, r = NAN;
    n = n < 32 ? n : 32;
    if (n >= min && n > 0) {
        for (int i = 0; i < n; i++)
            v[i] = hist[i];
        m = sup_median(v, n);
        for (int i = 0; i < n; i++)
            dev[i] = fabs(hist[i] - m);
        double mad = 1.4826 * sup_median(dev, n);
        r = mad > 0 ? (x - m) / mad : NAN;
    }
    if (med)
        *med = m;
    if (rz)
        *rz = r;
    return isfinite(r) && r > z;
}

/* Records loss; true when it is a spike against the window before it. */
int sup_check_spike(sup *s, double loss)
{
    int n = s->nloss < 32 ? s->nloss : 32;
    int spike = s->o->spike_z > 0 && sup_robust_spike(s->losses, n, 8, loss, s->o->spike_z,
                                                       NULL, NULL);
    if (!spike)
        s->losses[s->nloss++ % 32] = loss;
    return spike;
}

/* A validation loss (event "validation", detail "loss=X" from rank 0): a spike against the
 * last 16 (robust z > spike_z, at least 5 before it) is flagged, not failed: held-out loss
 * going up is the model's behaviour, which a rollback would replay bit for bit. Its own
 * value joins the window either way (a new level is learnt). */
void sup_check_validation(sup *s, long step, const char *detail)
{
    double v, med, rz;
    if (sscanf(detail, "loss=%lf", &v) != 1 || !isfinite(v))
        return;
    int n = s->nval < 16 ? s->nval : 16;
    if (s->o->spike_z > 0 && sup_robust_spike(s->vals, n, 5, v, s->o->spike_z, &med, &rz)) {
        s->val_spikes++;
        s->val_spike_step = step;
        sup_event(s, "validation_spike",
                  json_pack("{s:I,s:f,s:f,s:f}", "step", (json_int_t)step, "val_loss", v,
                            "median", med, "robust_z", rz));
        sup_say(s, "WARNING: validation loss %.4g at step %ld is a spike (median of the last %d "
                   "%.4g, robust z %.1f > %.1f): the run goes on; look at the data and the "
                   "learning rate around this step",
                v, step, n, med, rz, s->o->spike_z);
    }
    s->vals[s->nval++ % 16] = v;
}
