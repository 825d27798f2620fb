/*
 * cmd_dashboard.c - `grit dashboard RUN_DIR`: serve a run's dashboard and
 * /metrics read-only (src/obs/obs.h), and the observation flags that
 * `grit launch` shares (obs_cli_opt / obs_cli_start / obs_cli_finish).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/obs_cli.h"
#include "core/fsutil.h"
#include "obs/obs.h"

const char obs_cli_help[] =
    "  --dashboard-port P     serve the dashboard and Prometheus /metrics on port P (default 0:\n"
    "                         any free port; the URL is printed and in RUN_DIR/dashboard.url)\n"
    "  --dashboard-bind ADDR  (default 127.0.0.1, loopback only)  --no-dashboard: serve nothing\n"
    "  --price-node-hour X    cost per node-hour (all allocated nodes, spares included)\n"
    "  --grid-gco2-kwh G      grid carbon intensity for the CO2 figure\n"
    "  --node-watts W         power per node when neither RAPL (/sys/class/powercap) nor\n"
    "                         NVML (GPUs) can be read\n"
    "  --peak-tflops T        peak TFLOP/s per node, for MFU\n";

int obs_cli_opt(int argc, char **argv, int *i, obs_cli *o)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--no-dashboard")) {
        o->off = 1;
        return 1;
    }
    static const char *const names[] = {"--dashboard-port", "--price-node-hour", "--grid-gco2-kwh",
                                        "--node-watts", "--peak-tflops", "--dashboard-bind",
                                        "--metrics-port", "--port", "--bind"};
    int k;
    for (k = 0; k < 9 && strcmp(a, names[k]); k++)
        ;
    if (k == 9 || (k >= 7 && !o->standalone)) /* --port/--bind: grit dashboard's names */
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "grit: %s needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    o->set = 1;
    switch (k) {
    case 0:
    case 6:
    case 7:
        return cli_int(argv[0], a, v, 0, 65535, &o->port) ? -1 : 1;
    case 1: return cli_num(argv[0], a, v, 0, 1e9, &o->cfg.price_node_hour) ? -1 : 1;
    case 2: return cli_num(argv[0], a, v, 0, 1e5, &o->cfg.grid_gco2_kwh) ? -1 : 1;
    case 3: return cli_num(argv[0], a, v, 0, 1e7, &o->cfg.node_watts) ? -1 : 1;
    case 4: return cli_num(argv[0], a, v, 0, 1e9, &o->cfg.peak_tflops) ? -1 : 1;
    default: o->bind = v; return 1;
    }
}

static void warn_exposed(const char *who, const char *bind)
{
    if (bind && strncmp(bind, "127.", 4) && strcmp(bind, "localhost"))
        fprintf(stderr, "%s: note: the dashboard listens on %s, beyond loopback: whoever can "
                        "reach it can read this run's metrics (read-only)\n", who, bind);
}

/* Overlays the flags given (non-zero) onto the figures in obs.json. */
static void merge(obs_cfg *base, const obs_cfg *flags)
{
    if (flags->price_node_hour > 0) base->price_node_hour = flags->price_node_hour;
    if (flags->grid_gco2_kwh > 0) base->grid_gco2_kwh = flags->grid_gco2_kwh;
    if (flags->node_watts > 0) base->node_watts = flags->node_watts;
    if (flags->peak_tflops > 0) base->peak_tflops = flags->peak_tflops;
}

int obs_cli_start(obs_cli *o, const char *run_dir, int quiet)
{
    obs_cfg c = {0};
    if (fs_mkdirs(run_dir) != GRIT_OK || obs_cfg_load(run_dir, &c) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        return -1;
    }
    merge(&c, &o->cfg);
    o->cfg = c;
    if (obs_cfg_save(run_dir, &c) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        return -1;
    }
    if (o->off)
        return 0;
    obs_serve_opts so = {.run_dir = run_dir, .cfg = c, .bind = o->bind, .port = o->port, .live = 1};
    if (obs_serve(&so, &o->srv) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        return -1;
    }
    warn_exposed("grit launch", o->bind);
    char url[128], path[1200];
    snprintf(url, sizeof url, "http://%s:%d/\n", o->bind ? o->bind : "127.0.0.1",
             obs_server_port(o->srv));
    snprintf(path, sizeof path, "%s/dashboard.url", run_dir);
    fs_write_durable(path, url, strlen(url));
    if (!quiet)
        fprintf(stderr, "grit launch: dashboard %.*s, Prometheus %.*smetrics\n",
                (int)strlen(url) - 1, url, (int)strlen(url) - 1, url);
    return 0;
}

void obs_cli_finish(obs_cli *o, const char *run_dir)
{
    obs_server_close(o->srv);
    o->srv = NULL;
    json_t *v = obs_view(run_dir, &o->cfg, 1);
    if (v) {
        obs_print_summary(stderr, v);
        fputc('\n', stderr);
        json_decref(v);
    }
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit dashboard RUN_DIR [options]\n"
            "\n"
            "Serves the dashboard of a run (finished or still running; read-only) and its\n"
            "Prometheus /metrics, until interrupted. The page polls the run's files, so a\n"
            "running job's curves move.\n"
            "\n"
            "options:\n"
            "  --port P               (default 8787; 0: any free port)\n"
            "  --bind ADDR            (default 127.0.0.1, loopback only)\n"
            "  --price-node-hour X  --grid-gco2-kwh G  --node-watts W  --peak-tflops T\n"
            "                         override the figures grit launch saved in RUN_DIR/obs.json\n"
            "  --port-file FILE       write the port chosen to FILE (for scripts with --port 0)\n"
            "  -h, --help             this help\n"
            "\n"
            "Routes: / (dashboard), /metrics (Prometheus text 0.0.4), /api/run (JSON).\n");
}

int cmd_dashboard(int argc, char **argv)
{
    obs_cli o = {.port = 8787, .standalone = 1};
    const char *run_dir = NULL, *port_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--port-file") && i + 1 < argc) {
            port_file = argv[++i];
            continue;
        }
        int r = obs_cli_opt(argc, argv, &i, &o);
        if (r < 0)
            return 2;
        if (r == 0 && a[0] != '-' && !run_dir) {
            run_dir = a;
            continue;
        }
        if (r == 0 || o.off) {
            fprintf(stderr, "grit dashboard: unknown option or extra argument: '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!run_dir) {
        fprintf(stderr, "grit dashboard: RUN_DIR is required\n");
        usage(stderr);
        return 2;
    }
    obs_cfg c = {0};
    if (obs_cfg_load(run_dir, &c) != GRIT_OK) {
        fprintf(stderr, "grit dashboard: %s\n", grit_errmsg());
        return 2;
    }
    merge(&c, &o.cfg);
    json_t *v = obs_view(run_dir, &c, 1);
    if (!v) {
        fprintf(stderr, "grit dashboard: %s\n", grit_errmsg());
        return 2;
    }
    json_decref(v);
    obs_serve_opts so = {.run_dir = run_dir, .cfg = c, .bind = o.bind, .port = o.port};
    obs_server *srv;
    if (obs_serve(&so, &srv) != GRIT_OK) {
        fprintf(stderr, "grit dashboard: %s\n", grit_errmsg());
        return 2;
    }
    warn_exposed("grit dashboard", o.bind);
    int port = obs_server_port(srv);
    if (port_file) {
        char text[32];
        snprintf(text, sizeof text, "%d\n", port);
        if (fs_write_durable(port_file, text, strlen(text)) != GRIT_OK) {
            fprintf(stderr, "grit dashboard: %s\n", grit_errmsg());
            obs_server_close(srv);
            return 2;
        }
    }
    fprintf(stderr, "grit dashboard: %s on http://%s:%d/ (metrics: /metrics); Ctrl-C stops\n",
            run_dir, o.bind ? o.bind : "127.0.0.1", port);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    while (!stop)
        pause();
    obs_server_close(srv);
    return 0;
}
