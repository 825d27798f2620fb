/*
 * stats.c - `grit rate results` and `grit rate export`.
 *
 * Per checkpoint (the folder its answers were generated from): the number of
 * ratings, the mean score with a 95% confidence interval mean +- t(0.975, n-1)
 * * sd / sqrt(n) (Student's t, sd the sample standard deviation; undefined for
 * n < 2), the share flagged as fabrication, and Krippendorff's alpha over that
 * checkpoint's answers. Alpha over every answer is reported too.
 *
 * Krippendorff's alpha, interval metric (delta(a, b) = (a - b)^2): units are
 * answers, coders are raters, values are the 1-5 scores. Only units with at
 * least two ratings are pairable; with n pairable values,
 *   D_o = 1/n * sum_u 1/(m_u - 1) * sum_{i != j in u} (v_i - v_j)^2
 *   D_e = 1/(n (n - 1)) * sum_{i != j over all pairable values} (v_i - v_j)^2
 *   alpha = 1 - D_o / D_e
 * (ordered pairs; sum_{i != j} (v_i - v_j)^2 = 2 (m sum v^2 - (sum v)^2)).
 * The interval metric treats the 1-5 scale as equally spaced. The ordinal metric
 * does not: the distance between values c < k grows with how many pairable values
 * lie between them, delta^2(c, k) = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2 with n_g
 * the number of pairable values equal to g (so a step between two common scores
 * counts more than one into a rarely used one). Both are reported; the unit test
 * checks both against Krippendorff's published example (interval 0.849, ordinal
 * 0.815).
 *
 * Student's t quantile: bisection on the CDF, which is the regularized
 * incomplete beta function I_x(df/2, 1/2) at x = df / (df + t^2), evaluated by
 * its continued fraction (modified Lentz).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "rate/rate_internal.h"

static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    d = fabs(d) < tiny ? tiny : d;
    d = 1 / d;
    double h = d;
    for (int m = 1; m < 500; m++) {
        double m2 = 2.0 * m;
        double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        d = 1 + num * d, c = 1 + num / c;
        d = fabs(d) < tiny ? tiny : d, c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        h *= d * c;
        num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        d = 1 + num * d, c = 1 + num / c;
        d = fabs(d) < tiny ? tiny : d, c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15)
            break;
    }
    return h;
}

static double ibeta(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lf = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2))
        return exp(lf) * betacf(a, b, x) / a;
    return 1 - exp(lf) * betacf(b, a, 1 - x) / b;
}

double rate_t975(int df)
{
    double lo = 0, hi = 1000;
    for (int k = 0; k < 200; k++) {
        double t = 0.5 * (lo + hi);
        double cdf = 1 - 0.5 * ibeta(df / 2.0, 0.5, df / (df + t * t));
        if (cdf < 0.975)
            lo = t;
        else
            hi = t;
    }
    return 0.5 * (lo + hi);
}

typedef struct uv {
    int64_t u;
    double v;
} uv;

static int uv_cmp(const void *a, const void *b)
{
    int64_t x = ((const uv *)a)->u, y = ((const uv *)b)->u;
    return x < y ? -1 : x > y;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double rate_alpha_interval(const int64_t *unit, const double *v, int n)
{
    uv *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
    if (!p)
        return NAN;
    for (int i = 0; i < n; i++)
        p[i] = (uv){unit[i], v[i]};
    qsort(p, (size_t)n, sizeof *p, uv_cmp);
    double within = 0, s1 = 0, s2 = 0, np = 0;
    for (int i = 0; i < n;) {
        int j = i;
        double a = 0, b = 0;
        while (j < n && p[j].u == p[i].u)
            a += p[j].v, b += p[j].v * p[j].v, j++;
        int m = j - i;
        if (m >= 2) {
            within += 2 * (m * b - a * a) / (m - 1);
            s1 += a, s2 += b, np += m;
        }
        i = j;
    }
    free(p);
    if (np < 2)
        return NAN;
    double d_o = within / np;
    double d_e = 2 * (np * s2 - s1 * s1) / (np * (np - 1));
    if (!(d_e > 0))
        return NAN;
    return 1 - d_o / d_e;
}

/* Ordinal delta^2 between the values of ranks c and k: cum[i] = n_0 + ... + n_{i-1}. */
static double ord_d2(const double *cum, const double *cnt, int c, int k)
{
    if (c > k) {
        int t = c;
        c = k, k = t;
    }
    double d = cum[k + 1] - cum[c] - (cnt[c] + cnt[k]) / 2;
    return c == k ? 0.0 : d * d;
}

double rate_alpha_ordinal(const int64_t *unit, const double *v, int n)
{
    uv *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
    double *g = malloc(sizeof *g * (size_t)(n > 0 ? n : 1)); /* distinct pairable values */
    double *cnt = calloc((size_t)(n > 0 ? n : 1), sizeof *cnt), *cum = NULL;
    int *rank = malloc(sizeof *rank * (size_t)(n > 0 ? n : 1));
    double alpha = NAN;
    if (!p || !g || !cnt || !rank)
        goto out;
    for (int i = 0; i < n; i++)
        p[i] = (uv){unit[i], v[i]};
    qsort(p, (size_t)n, sizeof *p, uv_cmp);
    int ng = 0, np = 0; /* pairable: units with >= 2 values */
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && p[j].u == p[i].u)
            j++;
        for (int k = i; j - i >= 2 && k < j; k++)
            g[ng++] = p[k].v;
        np += j - i >= 2 ? j - i : 0;
        i = j;
    }
    if (np < 2)
        goto out;
    qsort(g, (size_t)ng, sizeof *g, dbl_cmp);
    int nd = 0;
    for (int i = 0; i < ng; i++)
        if (!nd || g[i] != g[nd - 1])
            g[nd++] = g[i];
    for (int i = 0; i < n; i++) { /* rank of each value among the distinct ones */
        int lo = 0, hi = nd - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (g[mid] < p[i].v)
                lo = mid + 1;
            else
                hi = mid;
        }
        rank[i] = lo;
    }
    for (int i = 0; i < n;) { /* n_g over the pairable values */
        int j = i;
        while (j < n && p[j].u == p[i].u)
            j++;
        for (int k = i; j - i >= 2 && k < j; k++)
            cnt[rank[k]] += 1;
        i = j;
    }
    if (!(cum = malloc(sizeof *cum * (size_t)(nd + 1))))
        goto out;
    cum[0] = 0;
    for (int c = 0; c < nd; c++)
        cum[c + 1] = cum[c] + cnt[c];
    double within = 0, between = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && p[j].u == p[i].u)
            j++;
        double su = 0;
        for (int a = i; j - i >= 2 && a < j; a++)
            for (int b = i; b < j; b++)
                su += ord_d2(cum, cnt, rank[a], rank[b]);
        within += j - i >= 2 ? su / (j - i - 1) : 0;
        i = j;
    }
    for (int c = 0; c < nd; c++)
        for (int k = 0; k < nd; k++)
            between += cnt[c] * cnt[k] * ord_d2(cum, cnt, c, k);
    double d_o = within / np, d_e = between / ((double)np * (np - 1));
    if (d_e > 0)
        alpha = 1 - d_o / d_e;
out:
    free(p);
    free(g);
    free(cnt);
    free(cum);
    free(rank);
    return alpha;
}

/* The ratings (answer, score, fabrication, checkpoint, step) in checkpoint order. */
grit_err rate_results_compute(rate_db *d, rate_results *r)
{
    memset(r, 0, sizeof *r);
    sqlite3_stmt *s;
    pthread_mutex_lock(&d->mu);
    grit_err rc = rate__prep(d, &s,
                             "SELECT r.answer, r.score, r.fabrication, r.checkpoint, a.step"
                             " FROM ratings r JOIN answers a ON a.id=r.answer"
                             " ORDER BY a.step, r.checkpoint, r.id",
                             "");
    int n = 0, cap = 0;
    int64_t *unit = NULL;
    double *val = NULL;
    int *fab = NULL, *ck = NULL;
    while (rc == GRIT_OK && sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            int64_t *u2 = realloc(unit, sizeof *u2 * (size_t)cap);
            unit = u2 ? u2 : unit;
            double *v2 = realloc(val, sizeof *v2 * (size_t)cap);
            val = v2 ? v2 : val;
            int *f2 = realloc(fab, sizeof *f2 * (size_t)cap);
            fab = f2 ? f2 : fab;
            int *c2 = realloc(ck, sizeof *c2 * (size_t)cap);
            ck = c2 ? c2 : ck;
            rate_ckpt_stats *k2 = realloc(r->ck, sizeof *k2 * (size_t)cap);
            r->ck = k2 ? k2 : r->ck;
            if (!u2 || !v2 || !f2 || !c2 || !k2) {
                rc = grit_errf(GRIT_ENOMEM, "out of memory");
                break;
            }
        }
        unit[n] = sqlite3_column_int64(s, 0);
        val[n] = sqlite3_column_int(s, 1);
        fab[n] = sqlite3_column_int(s, 2);
        const char *cp = (const char *)sqlite3_column_text(s, 3);
        if (!r->nck || strcmp(r->ck[r->nck - 1].checkpoint, cp)) {
            rate_ckpt_stats *c = &r->ck[r->nck++];
            memset(c, 0, sizeof *c);
            snprintf(c->checkpoint, sizeof c->checkpoint, "%s", cp);
            c->step = sqlite3_column_int64(s, 4);
        }
        ck[n++] = r->nck - 1;
    }
    if (s)
        sqlite3_finalize(s);
    if (rc == GRIT_OK && rate__prep(d, &s, "SELECT count(DISTINCT rater) FROM ratings", "") ==
                             GRIT_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            r->nraters = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
    }
    pthread_mutex_unlock(&d->mu);
    r->nratings = n;
    for (int c = 0; rc == GRIT_OK && c < r->nck; c++) {
        rate_ckpt_stats *k = &r->ck[c];
        int first = -1;
        double sum = 0, ss = 0, f = 0;
        for (int i = 0; i < n; i++)
            if (ck[i] == c) {
                first = first < 0 ? i : first;
                k->n++, sum += val[i], f += fab[i];
            }
        k->mean = sum / k->n;
        for (int i = 0; i < n; i++)
            if (ck[i] == c)
                ss += (val[i] - k->mean) * (val[i] - k->mean);
        k->fabrication = f / k->n;
        k->sd = k->n > 1 ? sqrt(ss / (k->n - 1)) : NAN;
        double h = k->n > 1 ? rate_t975(k->n - 1) * k->sd / sqrt((double)k->n) : NAN;
        k->lo = k->mean - h, k->hi = k->mean + h;
        /* the checkpoint's ratings are contiguous (ordered by checkpoint) */
        k->alpha = rate_alpha_interval(unit + first, val + first, k->n);
        k->alpha_ordinal = rate_alpha_ordinal(unit + first, val + first, k->n);
    }
    r->alpha = rc == GRIT_OK ? rate_alpha_interval(unit, val, n) : NAN;
    r->alpha_ordinal = rc == GRIT_OK ? rate_alpha_ordinal(unit, val, n) : NAN;
    free(unit);
    free(val);
    free(fab);
    free(ck);
    if (rc)
        rate_results_free(r);
    return rc;
}

void rate_results_free(rate_results *r)
{
    free(r->ck);
    memset(r, 0, sizeof *r);
}

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

void rate_results_print(const rate_results *r, FILE *f, int json)
{
    if (json) {
        json_t *o = json_object(), *a = json_array();
        json_object_set_new(o, "ratings", json_integer(r->nratings));
        json_object_set_new(o, "raters", json_integer(r->nraters));
        json_object_set_new(o, "alpha", num_or_null(r->alpha));
        json_object_set_new(o, "alpha_metric", json_string("interval"));
        json_object_set_new(o, "alpha_ordinal", num_or_null(r->alpha_ordinal));
        for (int c = 0; c < r->nck; c++) {
            const rate_ckpt_stats *k = &r->ck[c];
            json_t *e = json_object();
            json_object_set_new(e, "checkpoint", json_string(k->checkpoint));
            json_object_set_new(e, "step", json_integer(k->step));
            json_object_set_new(e, "n", json_integer(k->n));
            json_object_set_new(e, "mean", num_or_null(k->mean));
            json_object_set_new(e, "ci95", json_pack("[oo]", num_or_null(k->lo), num_or_null(k->hi)));
            json_object_set_new(e, "fabrication_rate", num_or_null(k->fabrication));
            json_object_set_new(e, "alpha", num_or_null(k->alpha));
            json_object_set_new(e, "alpha_ordinal", num_or_null(k->alpha_ordinal));
            json_array_append_new(a, e);
        }
        json_object_set_new(o, "checkpoints", a);
        char *s = json_dumps(o, JSON_REAL_PRECISION(17));
        if (s)
            fprintf(f, "%s\n", s);
        free(s);
        json_decref(o);
        return;
    }
    fprintf(f, "%d ratings by %d raters; Krippendorff's alpha %.3f (interval), %.3f (ordinal)\n",
            r->nratings, r->nraters, r->alpha, r->alpha_ordinal);
    fprintf(f, "%-10s %6s %6s %17s %8s %7s %7s  %s\n", "step", "n", "mean", "95% CI", "fabric.",
            "alpha", "ordinal", "checkpoint");
    for (int c = 0; c < r->nck; c++) {
        const rate_ckpt_stats *k = &r->ck[c];
        fprintf(f, "%-10lld %6d %6.3f  [%6.3f, %6.3f] %7.1f%% %7.3f %7.3f  %s\n",
                (long long)k->step, k->n, k->mean, k->lo, k->hi, 100 * k->fabrication, k->alpha,
                k->alpha_ordinal, k->checkpoint);
    }
}

/* --- export -------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n + 1)
            c *= 2;
        char *t = realloc(b->p, c);
        if (!t) {
            b->oom = 1;
            return;
        }
        b->p = t, b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void put_csv(sbuf *b, const char *s)
{
    put(b, "\"", 1);
    for (; *s; s++) {
        put(b, s, 1);
        if (*s == '"')
            put(b, "\"", 1); /* a quote inside is doubled */
    }
    put(b, "\"", 1);
}

static const char *cols[] = {"id",      "rater",       "answer",  "checkpoint", "step",
                             "prompt",  "version",     "score",   "fabrication", "comment",
                             "created"};

grit_err rate_export(rate_db *d, const char *out, int csv)
{
    sqlite3_stmt *s;
    sbuf b = {0};
    pthread_mutex_lock(&d->mu);
    grit_err rc = rate__prep(d, &s,
                             "SELECT r.id, w.name, r.answer, r.checkpoint, a.step, a.prompt,"
                             " r.version, r.score, r.fabrication, r.comment, r.created"
                             " FROM ratings r JOIN raters w ON w.id=r.rater"
                             " JOIN answers a ON a.id=r.answer ORDER BY r.id",
                             "");
    if (csv)
        for (int c = 0; c < 11; c++)
            put(&b, cols[c], strlen(cols[c])), put(&b, c < 10 ? "," : "\r\n", c < 10 ? 1 : 2);
    while (rc == GRIT_OK && sqlite3_step(s) == SQLITE_ROW) {
        long long id = sqlite3_column_int64(s, 0), ans = sqlite3_column_int64(s, 2),
                  step = sqlite3_column_int64(s, 4);
        int score = sqlite3_column_int(s, 7), fab = sqlite3_column_int(s, 8);
        double created = sqlite3_column_double(s, 10);
        const char *t[6];
        for (int c = 0, k = 0; c < 11; c++)
            if (c == 1 || c == 3 || c == 5 || c == 6 || c == 9)
                t[k++] = (const char *)sqlite3_column_text(s, c);
        if (csv) {
            char num[64];
            int m = snprintf(num, sizeof num, "%lld,", id);
            put(&b, num, (size_t)m);
            put_csv(&b, t[0]);
            m = snprintf(num, sizeof num, ",%lld,", ans);
            put(&b, num, (size_t)m);
            put_csv(&b, t[1]);
            m = snprintf(num, sizeof num, ",%lld,", step);
            put(&b, num, (size_t)m);
            put_csv(&b, t[2]);
            put(&b, ",", 1);
            put_csv(&b, t[3]);
            m = snprintf(num, sizeof num, ",%d,%d,", score, fab);
            put(&b, num, (size_t)m);
            put_csv(&b, t[4]);
            m = snprintf(num, sizeof num, ",%.17g\r\n", created);
            put(&b, num, (size_t)m);
        } else {
            json_t *o = json_pack("{sIsssIsssIsssssisbsssf}", "id", (json_int_t)id, "rater", t[0],
                                  "answer", (json_int_t)ans, "checkpoint", t[1], "step",
                                  (json_int_t)step, "prompt", t[2], "version", t[3], "score",
                                  score, "fabrication", fab, "comment", t[4], "created", created);
            char *j = o ? json_dumps(o, JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER) : NULL;
            if (!j)
                rc = grit_errf(GRIT_ENOMEM, "out of memory");
            else
                put(&b, j, strlen(j)), put(&b, "\n", 1);
            free(j);
            json_decref(o);
        }
    }
    if (s)
        sqlite3_finalize(s);
    pthread_mutex_unlock(&d->mu);
    if (rc == GRIT_OK && b.oom)
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc == GRIT_OK)
        rc = fs_write_durable(out, b.p ? b.p : "", b.n);
    free(b.p);
    return rc;
}
