/* plot.c - line charts as SVG (see plot.h). */
#include "eval/plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

#define W 720
#define H 420
#define L 80 /* margins: left, right, top, bottom */
#define R 170
#define T 40
#define B 60

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0 || b->oom)
            return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np, b->cap = cap;
    }
}

/* Text with XML's five special characters escaped. */
static void put_text(sbuf *b, const char *s)
{
    for (; s && *s; s++) {
        const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;"
                      : *s == '"' ? "&quot;" : *s == '\'' ? "&apos;" : NULL;
        if (e)
            put(b, "%s", e);
        else
            put(b, "%c", *s);
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving about n ticks over span. */
static double tick_step(double span, int n)
{
    double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

grit_err plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const plot_series *s, int ns)
{
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i])) {
                x0 = fmin(x0, s[k].x[i]), x1 = fmax(x1, s[k].x[i]);
                y0 = fmin(y0, s[k].y[i]), y1 = fmax(y1, s[k].y[i]);
            }
    if (!(x0 <= x1))
        return grit_errf(GRIT_EINVAL, "%s: nothing to plot (no finite points)", path);
    if (x1 - x0 < 1e-12)
        x0 -= 1, x1 += 1;
    if (y1 - y0 < 1e-12 * fmax(1, fabs(y0)))
        y0 -= fmax(1e-3, fabs(y0) * 0.05), y1 += fmax(1e-3, fabs(y1) * 0.05);
    double ys = tick_step(y1 - y0, 5), xs = tick_step(x1 - x0, 6);
    y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
    sbuf b = {0};
    put(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
            "fill=\"white\"/>\n<text x=\"%d\" y=\"24\" font-size=\"15\">", W, H, L);
    put_text(&b, title);
    put(&b, "</text>\n");
#define PX(v) (L + ((v) - x0) / (x1 - x0) * (W - L - R))
#define PY(v) (H - B - ((v) - y0) / (y1 - y0) * (H - T - B))
    for (double v = y0; v <= y1 + ys * 1e-6; v += ys)
        put(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" "
                "y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L, W - R, PY(v), PY(v), L - 6,
            PY(v) + 4, fabs(v) < ys * 1e-6 ? 0 : v);
    for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-6; v += xs)
        put(&b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#ddd\"/><text "
                "x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.6g</text>\n", PX(v), PX(v), T, H - B,
            PX(v), H - B + 16, v);
    put(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n",
        L, T, W - L - R, H - T - B);
    put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", L + (W - L - R) / 2, H - 18);
    put_text(&b, xlabel);
    put(&b, "</text>\n<text transform=\"translate(18,%d) rotate(-90)\" text-anchor=\"middle\">",
        T + (H - T - B) / 2);
    put_text(&b, ylabel);
    put(&b, "</text>\n");
    for (int k = 0; k < ns; k++) {
        const char *c = colors[k % 5];
        put(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
                put(&b, "%.1f,%.1f ", PX(s[k].x[i]), PY(s[k].y[i]));
        put(&b, "\"/>\n");
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
                put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", PX(s[k].x[i]),
                    PY(s[k].y[i]), c);
        put(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>"
                "<text x=\"%d\" y=\"%d\">", W - R + 14, W - R + 34, T + 10 + 18 * k, T + 10 + 18 * k,
            c, W - R + 40, T + 14 + 18 * k);
        put_text(&b, s[k].name);
        put(&b, "</text>\n");
    }
#undef PX
#undef PY
    put(&b, "</svg>\n");
    grit_err rc = b.oom ? grit_errf(GRIT_ENOMEM, "out of memory drawing %s", path)
                        : fs_write_durable(path, b.p, b.len);
    free(b.p);
    return rc;
}
