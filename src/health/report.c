/* report.c - health report as a table or JSON (see report.h). */
#include "health/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *net_json(const health_net *net)
{
    json_t *o = json_object(), *hosts = json_array(), *sizes = json_array(), *pairs = json_array();
    for (int q = 0; q < net->nranks; q++)
        json_array_append_new(hosts, json_string(net->hosts[q]));
    for (int k = 0; k < net->nsizes; k++) {
        const health_net_size *s = &net->sizes[k];
        json_array_append_new(sizes, json_pack("{s:I,s:f,s:f,s:f,s:b}", "bytes",
                                               (json_int_t)s->bytes, "time_us", s->time_us,
                                               "algbw_gbps", s->algbw_gbps, "busbw_gbps",
                                               s->busbw_gbps, "correct", s->wrong_rank < 0));
    }
    for (int i = 0; i < net->npairs; i++) {
        const health_net_pair *p = &net->pairs[i];
        json_array_append_new(pairs, json_pack("{s:i,s:i,s:o,s:o}", "a", p->a, "b", p->b,
                                               "latency_us", num_or_null(p->latency_us), "gbps",
                                               num_or_null(p->gbps)));
    }
    json_object_set_new(o, "ranks", json_integer(net->nranks));
    json_object_set_new(o, "hosts", hosts);
    json_object_set_new(o, "allreduce", sizes);
    json_object_set_new(o, "pair_bytes", json_integer((json_int_t)net->pair_bytes));
    json_object_set_new(o, "pair_rounds", json_integer(net->rounds));
    json_object_set_new(o, "pairs", pairs);
    return o;
}

/* The sweep like nccl-tests' table, then the pairs (slowest first, at most 10). */
static void net_print(const health_net *net, FILE *f)
{
    fprintf(f, "\nall-reduce over %d ranks (float sum, in place; busbw = algbw * 2(n-1)/n)\n",
            net->nranks);
    fprintf(f, "%12s %12s %12s %12s %8s\n", "bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
            "correct");
    for (int k = 0; k < net->nsizes; k++) {
        const health_net_size *s = &net->sizes[k];
        fprintf(f, "%12zu %12.1f %12.4f %12.4f %8s\n", s->bytes, s->time_us, s->algbw_gbps,
                s->busbw_gbps, s->wrong_rank < 0 ? "yes" : "NO");
    }
    fprintf(f, "pairs (ping-pong, %d rounds, %zu-byte messages for bandwidth), slowest first:\n",
            net->rounds, net->pair_bytes);
    fprintf(f, "%16s %12s %12s  %s\n", "pair", "lat(us)", "bw(GB/s)", "hosts");
    char *shown = calloc((size_t)net->npairs + 1, 1);
    for (int j = 0; j < net->npairs && j < 10 && shown; j++) {
        int w = -1;
        for (int i = 0; i < net->npairs; i++)
            if (!shown[i] && (w < 0 || net->pairs[i].latency_us > net->pairs[w].latency_us))
                w = i;
        shown[w] = 1;
        const health_net_pair *p = &net->pairs[w];
        char pr[24];
        snprintf(pr, sizeof pr, "%d<->%d", p->a, p->b);
        fprintf(f, "%16s %12.1f %12.4f  %s<->%s\n", pr, p->latency_us, p->gbps, net->hosts[p->a],
                net->hosts[p->b]);
    }
    if (net->npairs > 10)
        fprintf(f, "%16s (%d more in --json)\n", "...", net->npairs - 10);
    free(shown);
    fprintf(f, "\n");
}

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
        if (health_verdict_bad(res->verdict)) {
            json_t *f = json_object();
            json_object_set_new(f, "name", json_string(res->name));
            json_object_set_new(f, "reason", json_string(res->reason));
            json_array_append_new(fails, f);
        }
    }
    json_object_set_new(root, "ranks", json_integer(r->nranks));
    if (r->net)
        json_object_set_new(root, "network", net_json(r->net));
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
    static const char *const col[] = {"\033[32m", "\033[33m", "\033[31m", "\033[35m",
                                      "\033[33m"};
    const char *reset = color ? "\033[0m" : "";
    fprintf(f, "grit health (%s) on %s", r->mode == HEALTH_DEEP ? "deep" : "quick", r->host);
    if (r->nranks > 1)
        fprintf(f, " and %d other rank(s) (failures of rank N listed as rankN.<check>)",
                r->nranks - 1);
    fprintf(f, "\n");
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
    if (r->net)
        net_print(r->net, f);
    int code = health_exit_code(r);
    const health_result *bad = health_first_bad(r);
    fprintf(f, "%s%s%s in %.2f s", color ? col[code == 0 ? 0 : code == 1 ? 2 : 3] : "",
            code == 0 ? "HEALTHY" : code == 1 ? "UNHEALTHY" : "COULD NOT RUN", reset, r->seconds);
    if (bad) {
        int nbad = 0;
        for (int i = 0; i < r->n; i++)
            nbad += health_verdict_bad(r->results[i].verdict);
        fprintf(f, ": %d check(s) failed, first %s\n", nbad, bad->name);
        for (int i = 0; i < r->n; i++)
            if (health_verdict_bad(r->results[i].verdict))
                fprintf(f, "  - %s: %s\n", r->results[i].name, r->results[i].reason);
    } else {
        fprintf(f, "\n");
    }
    for (int i = 0; i < r->n; i++)
        if (r->results[i].verdict == HEALTH_WARN)
            fprintf(f, "  warning: %s: %s\n", r->results[i].name, r->results[i].reason);
}
