/* report.c - health report as a table or JSON (see report.h). */
#include "health/report.h"

#include <math.h>
#include <string.h>

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *health_report_json(const health_report *r)
{
    json_t *root = json_object(), *checks = json_array(), *fails = json_array();
    int code = health_exit_code(r);
    json_object_set_new(root, "format", json_string("grit-health"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "host", json_string(r->host));
    json_object_set_new(root, "mode", json_string(r->mode == HEALTH_DEEP ? "deep" : "quick"));
    json_object_set_new(root, "healthy", json_boolean(code == 0));
    json_object_set_new(root, "exit_code", json_integer(code));
    json_object_set_new(root, "duration_s", json_real(r->seconds));
    json_object_set_new(root, "threads", json_integer(r->threads));
    json_object_set_new(root, "digest", json_string(r->digest));
    for (int i = 0; i < r->n; i++) {
        const health_result *res = &r->results[i];
        json_t *c = json_object();
        char fam[48];
        snprintf(fam, sizeof fam, "%s", res->name);
        char *dot = strchr(fam, '.');
        if (dot)
            *dot = '\0';
        json_object_set_new(c, "name", json_string(res->name));
        json_object_set_new(c, "family", json_string(fam));
        json_object_set_new(c, "verdict", json_string(health_verdict_name(res->verdict)));
        json_object_set_new(c, "measured", num_or_null(res->measured));
        json_object_set_new(c, "threshold", num_or_null(res->threshold));
        json_object_set_new(c, "op", res->cmp == HEALTH_CMP_LE   ? json_string("<=")
                                     : res->cmp == HEALTH_CMP_GE ? json_string(">=")
                                                                 : json_null());
        json_object_set_new(c, "unit", json_string(res->unit));
        json_object_set_new(c, "reason", json_string(res->reason));
        json_object_set_new(c, "seconds", json_real(res->seconds));
        json_array_append_new(checks, c);
        if (res->verdict == HEALTH_FAIL || res->verdict == HEALTH_ERROR) {
            json_t *f = json_object();
            json_object_set_new(f, "name", json_string(res->name));
            json_object_set_new(f, "reason", json_string(res->reason));
            json_array_append_new(fails, f);
        }
    }
    json_object_set_new(root, "checks", checks);
    json_object_set_new(root, "failures", fails);
    return root;
}

static void fmt_value(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else if (isinf(v))
        snprintf(buf, cap, "unlimited");
    else if (fabs(v) >= 1e6 || (v != 0 && fabs(v) < 1e-2))
        snprintf(buf, cap, "%.3g", v);
    else if (v == floor(v))
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%.3f", v);
}

void health_report_print(const health_report *r, FILE *f, int color)
{
    static const char *const col[] = {"\033[32m", "\033[33m", "\033[31m", "\033[35m"};
    const char *reset = color ? "\033[0m" : "";
    fprintf(f, "grit health (%s) on %s\n", r->mode == HEALTH_DEEP ? "deep" : "quick", r->host);
    fprintf(f, "%-24s %-6s %12s %3s %-12s %-10s %s\n", "check", "result", "measured", "", "threshold",
            "unit", "detail");
    for (int i = 0; i < r->n; i++) {
        const health_result *res = &r->results[i];
        char m[32], t[32];
        fmt_value(m, sizeof m, res->measured);
        fmt_value(t, sizeof t, res->threshold);
        const char *op = res->cmp == HEALTH_CMP_LE ? "<=" : res->cmp == HEALTH_CMP_GE ? ">=" : "";
        fprintf(f, "%-24s %s%-6s%s %12s %3s %-12s %-10s %s\n", res->name,
                color ? col[res->verdict] : "", health_verdict_name(res->verdict), reset, m, op,
                res->cmp ? t : "", res->unit, res->reason);
    }
    int code = health_exit_code(r);
    const health_result *bad = health_first_bad(r);
    fprintf(f, "%s%s%s in %.2f s", color ? col[code == 0 ? 0 : code == 1 ? 2 : 3] : "",
            code == 0 ? "HEALTHY" : code == 1 ? "UNHEALTHY" : "COULD NOT RUN", reset, r->seconds);
    if (bad) {
        int nbad = 0;
        for (int i = 0; i < r->n; i++)
            nbad += r->results[i].verdict >= HEALTH_FAIL;
        fprintf(f, ": %d check(s) failed, first %s\n", nbad, bad->name);
        for (int i = 0; i < r->n; i++)
            if (r->results[i].verdict >= HEALTH_FAIL)
                fprintf(f, "  - %s: %s\n", r->results[i].name, r->results[i].reason);
    } else {
        fprintf(f, "\n");
    }
}
