/* cluster.c - node slots and cluster.json (see cluster.h). */
#include "supervise/cluster.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

const char *node_state_name(node_state s)
{
    return s == NODE_ACTIVE ? "active" : s == NODE_SPARE ? "spare" : "cordoned";
}

grit_err cluster_save(const cluster *c)
{
    json_t *nodes = json_array();
    for (int i = 0; i < c->count; i++) {
        const node_slot *n = &c->n[i];
        json_t *o = json_pack("{s:s,s:s,s:i}", "name", n->name, "state", node_state_name(n->state),
                              "position", n->position);
        if (n->reason[0])
            json_object_set_new(o, "reason", json_string(n->reason));
        json_array_append_new(nodes, o);
    }
    json_t *j = json_pack("{s:i,s:o}", "version", 1, "nodes", nodes);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    grit_err rc = fs_write_durable(c->path, text, strlen(text));
    free(text);
    return rc;
}

void cluster_free(cluster *c)
{
    free(c->n);
    c->n = NULL;
    c->count = 0;
}

/* Room for n slots in a fresh c; GRIT_EINVAL past CLUSTER_SLOTS_MAX. */
static grit_err alloc_slots(cluster *c, long n, const char *what)
{
    if (n < 0 || n > CLUSTER_SLOTS_MAX)
        return grit_errf(GRIT_EINVAL, "%s: %ld node slots, at most %d (CLUSTER_SLOTS_MAX)", what,
                         n, CLUSTER_SLOTS_MAX);
    c->n = calloc(n ? (size_t)n : 1, sizeof *c->n);
    return c->n ? GRIT_OK : grit_errf(GRIT_ENOMEM, "%s: out of memory for %ld slots", what, n);
}

grit_err cluster_open(cluster *c, const char *path, int nodes, int spares)
{
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    char *text = NULL;
    if (fs_read_all(path, &text, NULL) == GRIT_OK) {
        json_error_t je;
        json_t *j = json_loads(text, 0, &je), *arr = json_object_get(j, "nodes");
        free(text);
        if (!json_is_array(arr)) {
            json_decref(j);
            return grit_errf(GRIT_EFORMAT, "%s: expected {\"nodes\": [...]}", path);
        }
        grit_err rc = alloc_slots(c, (long)json_array_size(arr), path);
        if (rc != GRIT_OK) {
            json_decref(j);
            return rc;
        }
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_t *o = json_array_get(arr, i);
            const char *name = json_string_value(json_object_get(o, "name"));
            const char *st = json_string_value(json_object_get(o, "state"));
            const char *why = json_string_value(json_object_get(o, "reason"));
            if (!name || !st) {
                json_decref(j);
                cluster_free(c);
                return grit_errf(GRIT_EFORMAT, "%s: nodes[%zu]: expected name and state", path, i);
            }
            node_slot *n = &c->n[c->count++];
            snprintf(n->name, sizeof n->name, "%s", name);
            n->state = !strcmp(st, "active") ? NODE_ACTIVE : !strcmp(st, "spare") ? NODE_SPARE
                                                                                  : NODE_CORDONED;
            snprintf(n->reason, sizeof n->reason, "%s", why ? why : "");
            n->position = (int)json_integer_value(json_object_get(o, "position"));
            if (n->state != NODE_ACTIVE)
                n->position = -1;
        }
        json_decref(j);
        return GRIT_OK;
    }
    if ((long)nodes + spares > CLUSTER_SLOTS_MAX || nodes < 1 || spares < 0)
        return grit_errf(GRIT_EINVAL, "--nodes %d --spares %d: expected 1..%d slots", nodes,
                         spares, CLUSTER_SLOTS_MAX);
    grit_err rc = alloc_slots(c, (long)nodes + spares, path);
    if (rc != GRIT_OK)
        return rc;
    for (int i = 0; i < nodes + spares; i++) {
        node_slot *n = &c->n[c->count++];
        snprintf(n->name, sizeof n->name, "node%d", i);
        n->state = i < nodes ? NODE_ACTIVE : NODE_SPARE;
        n->position = i < nodes ? i : -1;
    }
    return cluster_save(c);
}

grit_err cluster_open_hosts(cluster *c, const char *path, char hosts[][32], int n, int spares)
{
    if (n < 1 || n > CLUSTER_SLOTS_MAX || spares < 0 || spares >= n)
        return grit_errf(GRIT_EINVAL, "%d hosts with --spares %d: expected 1..%d hosts and "
                                      "fewer spares than hosts", n, spares, CLUSTER_SLOTS_MAX);
    cluster old;
    if (cluster_open(&old, path, 1, 0) == GRIT_OK && old.count == n) {
        int same = 1;
        for (int i = 0; i < n && same; i++)
            same = cluster_find(&old, hosts[i]) != NULL;
        if (same) {
            *c = old;
            return GRIT_OK;
        }
    }
    cluster_free(&old);
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    grit_err rc = alloc_slots(c, n, path);
    if (rc != GRIT_OK)
        return rc;
    for (int i = 0; i < n; i++) {
        node_slot *s = &c->n[c->count++];
        snprintf(s->name, sizeof s->name, "%s", hosts[i]);
        s->state = i < n - spares ? NODE_ACTIVE : NODE_SPARE;
        s->position = i < n - spares ? i : -1;
    }
    return cluster_save(c);
}

int cluster_active(const cluster *c)
{
    int k = 0;
    for (int i = 0; i < c->count; i++)
        k += c->n[i].state == NODE_ACTIVE;
    return k;
}

int cluster_spares(const cluster *c)
{
    int k = 0;
    for (int i = 0; i < c->count; i++)
        k += c->n[i].state == NODE_SPARE;
    return k;
}

const node_slot *cluster_at(const cluster *c, int p)
{
    for (int i = 0; i < c->count; i++)
        if (c->n[i].state == NODE_ACTIVE && c->n[i].position == p)
            return &c->n[i];
    return NULL;
}

node_slot *cluster_find(cluster *c, const char *name)
{
    for (int i = 0; i < c->count; i++)
        if (!strcmp(c->n[i].name, name))
            return &c->n[i];
    return NULL;
}

const char *cluster_replace(cluster *c, const char *name, const char *reason)
{
    node_slot *bad = cluster_find(c, name);
    if (!bad || bad->state != NODE_ACTIVE)
        return NULL;
    int pos = bad->position;
    bad->state = NODE_CORDONED;
    bad->position = -1;
    snprintf(bad->reason, sizeof bad->reason, "%s", reason);
    for (int i = 0; i < c->count; i++)
        if (c->n[i].state == NODE_SPARE) {
            c->n[i].state = NODE_ACTIVE;
            c->n[i].position = pos;
            return c->n[i].name;
        }
    /* no spare: close the gap so positions stay 0..active-1 */
    for (int i = 0; i < c->count; i++)
        if (c->n[i].state == NODE_ACTIVE && c->n[i].position > pos)
            c->n[i].position--;
    return NULL;
}

const char *cluster_park_last(cluster *c)
{
    node_slot *last = NULL;
    for (int i = 0; i < c->count; i++)
        if (c->n[i].state == NODE_ACTIVE && (!last || c->n[i].position > last->position))
            last = &c->n[i];
    if (!last)
        return NULL;
    last->state = NODE_SPARE;
    last->position = -1;
    last->reason[0] = '\0';
    return last->name;
}

grit_err cluster_add_spare(cluster *c, const char *name)
{
    node_slot *old = cluster_find(c, name);
    if (old && old->state != NODE_CORDONED)
        return grit_errf(GRIT_EINVAL, "node %s is already %s in %s", name,
                         node_state_name(old->state), c->path);
    if (!old && strlen(name) >= sizeof old->name)
        return grit_errf(GRIT_EINVAL, "node name '%s': at most %zu characters expected", name,
                         sizeof old->name - 1);
    if (!old && c->count >= CLUSTER_SLOTS_MAX)
        return grit_errf(GRIT_EINVAL, "%s: %d node slots, at most %d (CLUSTER_SLOTS_MAX)", c->path,
                         c->count + 1, CLUSTER_SLOTS_MAX);
    if (!old) {
        node_slot *n = realloc(c->n, (size_t)(c->count + 1) * sizeof *n);
        if (!n)
            return grit_errf(GRIT_ENOMEM, "%s: out of memory for %d slots", c->path, c->count + 1);
        c->n = n;
        old = &c->n[c->count++];
        memset(old, 0, sizeof *old);
        snprintf(old->name, sizeof old->name, "%s", name);
    }
    old->state = NODE_SPARE;
    old->position = -1;
    old->reason[0] = '\0';
    return GRIT_OK;
}

void cluster_names(const cluster *c, char *buf, size_t cap)
{
    buf[0] = '\0';
    int act = cluster_active(c);
    for (int p = 0; p < act; p++) {
        const node_slot *n = cluster_at(c, p);
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", p ? "," : "", n ? n->name : "?");
    }
}
