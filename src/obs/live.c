/*
 * live.c - obs.json (cost figures), the heartbeat-fed node registry and the run's
 * measured energy (obs.h). The registry is a set of tables behind one mutex: obs_beat()
 * and obs_energy_beat() run in the supervisor's loop, the HTTP thread samples this
 * machine and persists the registry to nodes.json once a second.
 *
 * Size: the node and host tables grow with the job (doubling; no fixed count), and a
 * beat finds its node or host through a hash index (a jansson object, name -> row), so
 * a beat costs the same at 4 nodes and at 500. Out of memory, a new node or host is left
 * out with one line on stderr, never a row overwritten.
 *
 * Energy is measured per host (a machine, named by its boot_id: obs_host_id):
 *
 *   workers   one rank per host (local rank 0, heartbeat/hb.c) samples its machine
 *             with an obs_meter on its heartbeat thread and reports the meter's
 *             cumulative joules (since that worker started) in every beat. Per host
 *             the registry keeps one reporter (rank, pid) and adds the increase of
 *             its counter:
 *               same rank and pid, counter up     add the difference
 *               counter down, or same rank with   a restarted worker (new attempt):
 *                 a new pid                       its counter began at 0, add it all
 *               another rank, reporter silent     take over; this beat is only a
 *                 for HOST_STALE_S                baseline (its counter may overlap
 *                                                 what the old reporter counted)
 *               another rank, reporter alive      ignored: a second sampler on the
 *                                                 same machine (local backend)
 *             so a host's energy never decreases and is never counted twice.
 *   self      the supervisor's machine, sampled by the live server's tick (one meter,
 *             obs_power_sample). It counts only when no worker reported energy from
 *             the same boot_id: in the local backend every rank runs on the
 *             supervisor's machine, and its workers' figure is used instead.
 *
 * Run energy = sum over hosts; power = sum of the latest power of hosts heard within
 * HOST_STALE_S; sources = union; GPUs = sum. Nodes whose ranks beat from a measured
 * host are "measured nodes"; the view charges node_watts for the other allocated nodes
 * (spares, hosts without RAPL or NVML). Nothing measured anywhere: node_watts for all.
 * Counters follow meter.c (RAPL wrap, NVML reload).
 */
#define _GNU_SOURCE
#include "obs/obs.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fsutil.h"
#include "core/jcfg.h"

#define HOST_STALE_S 10.0 /* a host silent this long: no power, its reporter may be replaced */

typedef struct node_stat {
    char name[64];
    long step;
    double step_time, comm_time, ts;
    int ranks;
} node_stat;

/* One machine's worker-reported energy. */
typedef struct host_stat {
    char id[64];     /* boot_id */
    char node[64];   /* the node its reporter named */
    int rank;        /* the reporter: the only rank whose counter is counted */
    long pid;
    double last_j;   /* the reporter's latest cumulative counter */
    double energy_j; /* counted for the run: never decreases */
    double power_w;  /* the reporter's latest interval */
    int sources, gpus;
    double ts;       /* latest energy report */
} host_stat;

/* A node name and the host its ranks beat from. */
typedef struct node_host {
    char name[64];
    int host; /* index into reg.h, -1: not measured yet */
    char id[64];
} node_host;

static struct {
    pthread_mutex_t mu;
    node_stat *n; /* [count] */
    int count, ncap;
    host_stat *h; /* [nhosts] */
    int nhosts, hcap;
    node_host *nh; /* [nnh] */
    int nnh, nhcap;
    json_t *n_idx, *h_idx, *nh_idx; /* name -> row of n, h, nh (NULL until the first) */
    char self_id[64]; /* "" until read (obs_host_id), or set by obs__set_host */
    int self_known;
    obs_energy self;  /* this machine, sampled by the live server */
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* This machine's meter: touched only under meter_mu (one sampler at a time; the
 * registry lock is taken only to publish the interval). */
static struct {
    pthread_mutex_t mu;
    obs_meter *m;
    char root[1024], lib[1024];
} self_meter = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const cfg_keys[] = {"price_node_hour", "grid_gco2_kwh", "node_watts",
                                       "peak_tflops", NULL};

grit_err obs_cfg_load(const char *run_dir, obs_cfg *c)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/obs.json", run_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return GRIT_OK;
    fclose(f);
    jcfg j;
    grit_err rc = jcfg_open(&j, path);
    if (rc)
        return rc;
    if (!(rc = jcfg_only(&j, j.root, "", cfg_keys)) &&
        !(rc = jcfg_num(&j, j.root, "", "price_node_hour", 0, 1e9, &c->price_node_hour)) &&
        !(rc = jcfg_num(&j, j.root, "", "grid_gco2_kwh", 0, 1e5, &c->grid_gco2_kwh)) &&
        !(rc = jcfg_num(&j, j.root, "", "node_watts", 0, 1e7, &c->node_watts)))
        rc = jcfg_num(&j, j.root, "", "peak_tflops", 0, 1e9, &c->peak_tflops);
    jcfg_close(&j);
    return rc;
}

grit_err obs_cfg_save(const char *run_dir, const obs_cfg *c)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/obs.json", run_dir);
    json_t *j = json_pack("{s:f,s:f,s:f,s:f}", "price_node_hour", c->price_node_hour,
                          "grid_gco2_kwh", c->grid_gco2_kwh, "node_watts", c->node_watts,
                          "peak_tflops", c->peak_tflops);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    grit_err rc = fs_write_durable(path, text, strlen(text));
    free(text);
    return rc;
}

/* reg.mu held: the row of key in idx, -1 when absent. */
static int idx_get(json_t *idx, const char *key)
{
    json_t *v = idx ? json_object_get(idx, key) : NULL;
    return v ? (int)json_integer_value(v) : -1;
}

/* reg.mu held: a new zeroed row at the end of *rows (*n rows, capacity *cap, size sz)
 * indexed by key in *idx; its number, or -1 (out of memory: said once on stderr). */
static int row_add(void **rows, int *n, int *cap, size_t sz, json_t **idx, const char *key)
{
    static int warned;
    if (!*idx)
        *idx = json_object();
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        void *p = *idx ? realloc(*rows, (size_t)c * sz) : NULL;
        if (!p) {
            if (!warned++)
                fprintf(stderr, "grit: out of memory for the node registry: %s left out\n", key);
            return -1;
        }
        *rows = p;
        *cap = c;
    }
    if (json_object_set_new(*idx, key, json_integer(*n)) != 0)
        return -1;
    memset((char *)*rows + (size_t)*n * sz, 0, sz);
    return (*n)++;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void obs_beat(const char *node, int rank, long step, double step_time, double comm_time)
{
    (void)rank;
    if (!node || !node[0] || step <= 0 || !isfinite(step_time))
        return;
    pthread_mutex_lock(&reg.mu);
    int i = idx_get(reg.n_idx, node);
    if (i < 0 && (i = row_add((void **)&reg.n, &reg.count, &reg.ncap, sizeof *reg.n, &reg.n_idx,
                              node)) >= 0)
        snprintf(reg.n[i].name, sizeof reg.n[i].name, "%s", node);
    if (i >= 0 && step >= reg.n[i].step) {
        node_stat *n = &reg.n[i];
        if (step > n->step) { /* first rank to report this step sets it, others take the max */
            n->step = step;
            n->step_time = step_time;
            n->comm_time = comm_time;
        } else {
            n->step_time = fmax(n->step_time, step_time);
            n->comm_time = fmax(n->comm_time, comm_time);
        }
        n->ts = now_s();
    }
    pthread_mutex_unlock(&reg.mu);
}

void obs_power_sample(void)
{
    obs__power_sample_at(NULL, NULL, 0);
}

void obs__power_sample_at(const char *root, const char *nvml_lib, double t)
{
    const char *r = root ? root : "", *l = nvml_lib ? nvml_lib : "";
    pthread_mutex_lock(&self_meter.mu);
    if (self_meter.m && (strcmp(self_meter.root, r) || strcmp(self_meter.lib, l))) {
        obs_meter_close(self_meter.m); /* another folder or library (tests): a new baseline */
        self_meter.m = NULL;
    }
    if (!self_meter.m) {
        self_meter.m = obs_meter_open(root, nvml_lib);
        snprintf(self_meter.root, sizeof self_meter.root, "%s", r);
        snprintf(self_meter.lib, sizeof self_meter.lib, "%s", l);
    }
    double d = 0;
    int src = self_meter.m ? obs_meter_sample(self_meter.m, t, &d) : 0;
    obs_energy e = {0};
    if (self_meter.m)
        obs_meter_read(self_meter.m, &e);
    pthread_mutex_unlock(&self_meter.mu);

    pthread_mutex_lock(&reg.mu);
    if (src) {
        reg.self.joules += d; /* the meter restarts when reopened: the registry keeps the sum */
        reg.self.watts = e.watts;
        reg.self.sources |= src;
    }
    reg.self.gpus = e.gpus > reg.self.gpus ? e.gpus : reg.self.gpus;
    pthread_mutex_unlock(&reg.mu);
}

void obs_power_close(void)
{
    pthread_mutex_lock(&self_meter.mu);
    obs_meter_close(self_meter.m);
    self_meter.m = NULL;
    pthread_mutex_unlock(&self_meter.mu);
}

void obs__power_reset(void)
{
    obs_power_close();
    pthread_mutex_lock(&reg.mu);
    memset(&reg.self, 0, sizeof reg.self);
    reg.nhosts = reg.nnh = 0;
    json_object_clear(reg.h_idx);
    json_object_clear(reg.nh_idx);
    reg.self_known = 0;
    pthread_mutex_unlock(&reg.mu);
}

void obs__energy(obs_energy *e)
{
    pthread_mutex_lock(&reg.mu);
    *e = reg.self;
    pthread_mutex_unlock(&reg.mu);
}

void obs__set_host(const char *id)
{
    pthread_mutex_lock(&reg.mu);
    snprintf(reg.self_id, sizeof reg.self_id, "%s", id ? id : "");
    reg.self_known = id != NULL;
    pthread_mutex_unlock(&reg.mu);
}

/* reg.mu held */
static const char *self_id(void)
{
    if (!reg.self_known) {
        obs_host_id(reg.self_id, sizeof reg.self_id);
        reg.self_known = 1;
    }
    return reg.self_id;
}

/* reg.mu held: the host entry for id, created when absent (NULL: out of memory). */
static host_stat *host_get(const char *id)
{
    int i = idx_get(reg.h_idx, id);
    if (i >= 0)
        return &reg.h[i];
    if ((i = row_add((void **)&reg.h, &reg.nhosts, &reg.hcap, sizeof *reg.h, &reg.h_idx, id)) < 0)
        return NULL;
    host_stat *h = &reg.h[i];
    snprintf(h->id, sizeof h->id, "%s", id);
    h->rank = -1;
    return h;
}

void obs_energy_beat(const obs_host_beat *b)
{
    if (!b->host || !b->host[0] || !b->node || !b->node[0])
        return;
    double t = b->t > 0 ? b->t : now_s();
    pthread_mutex_lock(&reg.mu);
    int k = idx_get(reg.nh_idx, b->node);
    if (k < 0 && (k = row_add((void **)&reg.nh, &reg.nnh, &reg.nhcap, sizeof *reg.nh, &reg.nh_idx,
                              b->node)) >= 0)
        snprintf(reg.nh[k].name, sizeof reg.nh[k].name, "%s", b->node);
    if (k >= 0) /* a node's ranks move with it: the latest host wins */
        snprintf(reg.nh[k].id, sizeof reg.nh[k].id, "%s", b->host);
    host_stat *h = NULL;
    if (b->sources && isfinite(b->joules) && b->joules >= 0 && (h = host_get(b->host))) {
        int same = h->rank == b->rank && h->pid == b->pid;
        if (h->rank < 0) { /* first report: all of it was spent during this run */
            h->energy_j += b->joules;
        } else if (same) {
            h->energy_j += b->joules >= h->last_j ? b->joules - h->last_j : b->joules;
        } else if (h->rank == b->rank) { /* the same rank restarted: a new counter from 0 */
            h->energy_j += b->joules;
        } else if (t - h->ts < HOST_STALE_S) {
            h = NULL; /* a second sampler on this machine: the reporter's figure stands */
        } /* else: another rank takes over a silent host; this beat is its baseline */
        if (h) {
            h->rank = b->rank;
            h->pid = b->pid;
            h->last_j = b->joules;
            h->power_w = isfinite(b->watts) && b->watts >= 0 ? b->watts : 0;
            h->sources |= b->sources & (OBS_SRC_RAPL | OBS_SRC_NVML);
            h->gpus = b->gpus > h->gpus ? b->gpus : h->gpus;
            h->ts = t;
            snprintf(h->node, sizeof h->node, "%s", b->node);
        }
    }
    pthread_mutex_unlock(&reg.mu);
}

/* reg.mu held: the run's totals (see the top of this file). */
static void totals(double now, obs_energy *e, int *hosts, int *nodes, int *self_counted)
{
    memset(e, 0, sizeof *e);
    *hosts = *nodes = 0;
    const char *me = self_id();
    *self_counted = reg.self.sources != 0;
    for (int i = 0; i < reg.nhosts; i++) {
        host_stat *h = &reg.h[i];
        e->joules += h->energy_j;
        if (now - h->ts < HOST_STALE_S)
            e->watts += h->power_w;
        e->sources |= h->sources;
        e->gpus += h->gpus;
        ++*hosts;
        if (me[0] && !strcmp(h->id, me))
            *self_counted = 0; /* the workers measured this machine: never count it twice */
    }
    for (int k = 0; k < reg.nnh; k++)
        *nodes += idx_get(reg.h_idx, reg.nh[k].id) >= 0;
    if (*self_counted) {
        e->joules += reg.self.joules;
        e->watts += reg.self.watts;
        e->sources |= reg.self.sources;
        e->gpus += reg.self.gpus;
        ++*hosts;
    }
}

void obs__totals(obs_energy *e, int *hosts, int *nodes)
{
    int self;
    pthread_mutex_lock(&reg.mu);
    totals(now_s(), e, hosts, nodes, &self);
    pthread_mutex_unlock(&reg.mu);
}

static json_t *source_list(int sources)
{
    json_t *src = json_array();
    if (sources & OBS_SRC_RAPL)
        json_array_append_new(src, json_string("RAPL"));
    if (sources & OBS_SRC_NVML)
        json_array_append_new(src, json_string("NVML"));
    return src;
}

const char *obs_source_name(int sources, int gpus, char *buf, size_t n)
{
    const char *rapl = sources & OBS_SRC_RAPL ? "RAPL" : "";
    if (!(sources & OBS_SRC_NVML))
        snprintf(buf, n, "%s", rapl);
    else
        snprintf(buf, n, "%s%sNVML (%d GPU%s)", rapl, *rapl ? " + " : "", gpus,
                 gpus == 1 ? "" : "s");
    return buf;
}

grit_err obs_registry_save(const char *run_dir)
{
    json_t *nodes = json_array(), *hosts = json_array();
    pthread_mutex_lock(&reg.mu);
    for (int i = 0; i < reg.count; i++)
        json_array_append_new(nodes, json_pack("{s:s,s:I,s:f,s:f,s:f}", "name", reg.n[i].name,
                                               "step", (json_int_t)reg.n[i].step, "step_time_s",
                                               reg.n[i].step_time, "comm_time_s",
                                               reg.n[i].comm_time, "ts", reg.n[i].ts));
    double now = now_s();
    obs_energy e;
    int nhosts, nnodes, self;
    totals(now, &e, &nhosts, &nnodes, &self);
    for (int i = 0; i < reg.nhosts; i++) {
        host_stat *h = &reg.h[i];
        json_array_append_new(hosts, json_pack("{s:s,s:s,s:f,s:f,s:o,s:i,s:b}", "host", h->id,
                                               "node", h->node, "energy_j", h->energy_j,
                                               "power_w", now - h->ts < HOST_STALE_S ? h->power_w : 0.0,
                                               "sources", source_list(h->sources), "gpus",
                                               h->gpus, "supervisor", !strcmp(h->id, self_id())));
    }
    if (self)
        json_array_append_new(hosts, json_pack("{s:s,s:s,s:f,s:f,s:o,s:i,s:b}", "host", self_id(),
                                               "node", "supervisor", "energy_j", reg.self.joules,
                                               "power_w", reg.self.watts, "sources",
                                               source_list(reg.self.sources), "gpus",
                                               reg.self.gpus, "supervisor", 1));
    json_t *j = json_pack("{s:i,s:o,s:b,s:o,s:i,s:f,s:f,s:o,s:i,s:i}", "version", 1, "nodes",
                          nodes, "energy_measured", e.sources != 0, "energy_sources",
                          source_list(e.sources), "gpus", e.gpus, "energy_j", e.joules,
                          "power_w", e.watts, "hosts", hosts, "hosts_measured", nhosts,
                          "nodes_measured", nnodes);
    pthread_mutex_unlock(&reg.mu);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    char path[1200];
    snprintf(path, sizeof path, "%s/nodes.json", run_dir);
    grit_err rc = fs_write_durable(path, text, strlen(text));
    free(text);
    return rc;
}
