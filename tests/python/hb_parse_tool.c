/* hb_parse_tool.c - grit's own heartbeat parser (hb_parse, src/heartbeat/hb.h) as a filter,
 * for the Python client's tests (tests/python/test_grit_client.py): reads lines from stdin,
 * parses each against the secret in argv[1], and prints one JSON object per line: the
 * parsed fields, or {"error": code} (GRIT_EFORMAT: wrong secret). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "heartbeat/hb.h"

static void num(const char *k, double v)
{
    if (!isfinite(v))
        printf(",\"%s\":\"%s\"", k, v != v ? "nan" : v > 0 ? "inf" : "-inf");
    else
        printf(",\"%s\":%.17g", k, v);
}

static void str(const char *k, const char *v)
{
    printf(",\"%s\":\"", k);
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hb_parse_tool SECRET < lines\n");
        return 2;
    }
    char line[2048];
    while (fgets(line, sizeof line, stdin)) {
        hb_msg m;
        grit_err rc = hb_parse(line, argv[1], &m);
        if (rc != GRIT_OK) {
            printf("{\"error\":%d,\"format\":%d}\n", (int)rc, rc == GRIT_EFORMAT);
            continue;
        }
        printf("{\"event\":%d,\"rank\":%d,\"step\":%ld,\"pid\":%ld", m.event, m.rank, m.step,
               m.pid);
        str("node", m.node);
        str("host", m.host);
        str("kind", m.kind);
        str("detail", m.detail);
        num("loss", m.loss);
        num("gnorm", m.gnorm);
        num("step_time", m.step_time);
        num("comm_time", m.comm_time);
        num("util", m.util);
        num("net_rx", m.net_rx);
        num("net_tx", m.net_tx);
        num("gpu_util", m.gpu_util);
        num("sm_clock", m.sm_clock);
        printf("}\n");
    }
    return 0;
}
