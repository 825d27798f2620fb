/* hb.c - the heartbeat line protocol: the parser both ends share (see hb.h; the
 * client thread is hb_client.c, the supervisor's socket hb_server.c). */
#include "heartbeat/hb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Constant-time comparison, so response timing does not leak the secret. */
static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0 && la > 0;
}

/* v as a number when all of it is one, else NAN (no measurement). */
static double whole_number(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    return end != v && !*end ? x : NAN;
}

grit_err hb_parse(const char *line, const char *secret, hb_msg *m)
{
    memset(m, 0, sizeof *m);
    m->rank = -1;
    m->step = -1;
    m->loss = m->gnorm = NAN;
    m->energy_j = NAN; /* esrc= without energy_j= measures nothing */
    m->util = m->net_rx = m->net_tx = m->gpu_util = m->sm_clock = NAN;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", line);
    buf[strcspn(buf, "\r\n")] = '\0';
    char *save = NULL, *tag = strtok_r(buf, " ", &save), *sec = strtok_r(NULL, " ", &save);
    if (!tag || (strcmp(tag, "HB1") && strcmp(tag, "EV1")))
        return grit_errf(GRIT_EINVAL, "not a heartbeat line (expected HB1 or EV1)");
    if (!sec || !same_secret(sec, secret))
        return grit_errf(GRIT_EFORMAT, "wrong or missing job secret");
    m->event = tag[0] == 'E';
    for (char *kv; (kv = strtok_r(NULL, " ", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return grit_errf(GRIT_EINVAL, "field '%.32s' is not key=value", kv);
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        char *end;
        if (!strcmp(k, "rank"))
            m->rank = (int)strtol(v, &end, 10);
        else if (!strcmp(k, "node"))
            snprintf(m->node, sizeof m->node, "%s", v);
        else if (!strcmp(k, "step"))
            m->step = strtol(v, &end, 10);
        else if (!strcmp(k, "loss")) {
            m->loss = strtod(v, &end);
            m->has_loss = true;
        }
        else if (!strcmp(k, "gnorm"))
            m->gnorm = strtod(v, &end);
        else if (!strcmp(k, "step_time"))
            m->step_time = strtod(v, &end);
        else if (!strcmp(k, "comm_time"))
            m->comm_time = strtod(v, &end);
        else if (!strcmp(k, "pid"))
            m->pid = strtol(v, &end, 10);
        else if (!strcmp(k, "host"))
            snprintf(m->host, sizeof m->host, "%s", strcmp(v, "-") ? v : "");
        else if (!strcmp(k, "energy_j"))
            m->energy_j = strtod(v, &end);
        else if (!strcmp(k, "power_w"))
            m->power_w = strtod(v, &end);
        else if (!strcmp(k, "esrc"))
            m->esrc = (int)strtol(v, &end, 10) & (HB_ESRC_RAPL | HB_ESRC_NVML);
        else if (!strcmp(k, "gpus"))
            m->gpus = (int)strtol(v, &end, 10);
        else if (!strcmp(k, "util"))
            m->util = whole_number(v);
        else if (!strcmp(k, "net_rx"))
            m->net_rx = whole_number(v);
        else if (!strcmp(k, "net_tx"))
            m->net_tx = whole_number(v);
        else if (!strcmp(k, "gpu_util"))
            m->gpu_util = whole_number(v);
        else if (!strcmp(k, "sm_clock"))
            m->sm_clock = whole_number(v);
        else if (!strcmp(k, "kind"))
            snprintf(m->kind, sizeof m->kind, "%s", v);
        else if (!strcmp(k, "detail"))
            snprintf(m->detail, sizeof m->detail, "%s", v);
    }
    if (m->rank < 0)
        return grit_errf(GRIT_EINVAL, "missing rank=");
    /* energy is all or nothing: a counter that is not a finite non-negative number, or
     * no counter, drops the measurement (the beat itself stands) */
    if (m->esrc && !(isfinite(m->energy_j) && m->energy_j >= 0 && m->energy_j < 1e18))
        m->esrc = 0;
    if (!isfinite(m->power_w) || m->power_w < 0)
        m->power_w = 0;
    if (m->gpus < 0 || m->gpus > 1000000)
        m->gpus = 0;
    /* a signal that is not a finite non-negative number is no measurement */
    if (!(isfinite(m->util) && m->util >= 0))
        m->util = NAN;
    if (!(isfinite(m->net_rx) && m->net_rx >= 0 && isfinite(m->net_tx) && m->net_tx >= 0))
        m->net_rx = m->net_tx = NAN;
    if (!(m->gpu_util >= 0 && m->gpu_util <= 1)) /* shares: 0..1 (NAN fails both) */
        m->gpu_util = NAN;
    if (!(m->sm_clock > 0 && m->sm_clock <= 1))
        m->sm_clock = NAN;
    return GRIT_OK;
}
