/* progress.c - progress bar with ETA (see progress.h). */
#include "core/progress.h"

#include <time.h>
#include <unistd.h>

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void format_duration(char *buf, size_t cap, double s)
{
    if (s < 0)
        s = 0;
    long t = (long)(s + 0.5);
    if (s < 60)
        snprintf(buf, cap, "%.1fs", s);
    else if (t < 3600)
        snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
}

void progress_init(progress *p, FILE *out, long total, long every)
{
    p->out = out;
    p->total = total > 0 ? total : 1;
    p->tty = out && isatty(fileno(out));
    p->every = every > 0 ? every : 1;
    p->t0 = now_seconds();
}

void progress_update(progress *p, long done, const char *text)
{
    if (!p->out)
        return;
    if (!text)
        text = "";
    if (!p->tty && done % p->every != 0 && done != p->total)
        return;
    double el = now_seconds() - p->t0;
    double eta = done > 0 ? el / (double)done * (double)(p->total - done) : 0;
    char bar[21], e1[32], e2[32];
    int fill = (int)(20 * done / p->total);
    for (int i = 0; i < 20; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[20] = '\0';
    format_duration(e1, sizeof e1, el);
    format_duration(e2, sizeof e2, eta);
    fprintf(p->out, "%s[%s] %ld/%ld %3d%% | %s | elapsed %s, ETA %s%s", p->tty ? "\r" : "",
            bar, done, p->total, (int)(100 * done / p->total), text, e1, e2,
            p->tty ? "\033[K" : "\n");
    fflush(p->out);
}

void progress_finish(progress *p)
{
    if (!p->out)
        return;
    if (p->tty)
        fputc('\n', p->out);
    fflush(p->out);
}
