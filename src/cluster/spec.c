/*
 * spec.c - reading and validating the cluster spec (see spec.h).
 *
 * Validation order: each group on its own (names, types, counts, lifecycle
 * files), then the groups together (duplicate names, exactly one controller,
 * total size). The first problem is reported; nothing is half-filled for the
 * caller to use (on error *s is zeroed).
 */
#include "cluster/spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fsutil.h"
#include "core/jcfg.h"

/* snprintf whose truncation is intended (bounded names and paths) */
static void sfmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sfmt(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((rc = (x)) != GRIT_OK)                                                                 \
            goto out;                                                                              \
    } while (0)

const char *cluster_role_name(cluster_role r)
{
    return r == CLUSTER_CONTROLLER ? "controller" : r == CLUSTER_LOGIN ? "login" : "worker";
}

int cluster_spec_group(const cluster_spec *s, const char *name)
{
    for (int i = 0; i < s->ngroups; i++)
        if (!strcmp(s->groups[i].name, name))
            return i;
    return -1;
}

/* HyperPod's name rule: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$ */
static int valid_name(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 63 || !isalnum((unsigned char)n[0]) || !isalnum((unsigned char)n[len - 1]))
        return 0;
    for (const char *p = n; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return 0;
    return 1;
}

static int valid_type(const char *t)
{
    if (!*t || strlen(t) >= 64)
        return 0;
    for (const char *p = t; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
            return 0;
    return 1;
}

/* Required string member: absent -> "missing" error at the enclosing object. */
static grit_err need_str(const jcfg *j, json_t *o, const char *prefix, const char *key,
                         const char *what, const char **out)
{
    *out = NULL;
    grit_err rc = jcfg_str(j, o, prefix, key, NULL, out);
    if (rc != GRIT_OK)
        return rc;
    if (!*out) {
        char p[256];
        sfmt(p, sizeof p, "%s%s%s", prefix, *prefix ? "." : "", key);
        return jcfg_fail(j, p, "missing; expected %s", what);
    }
    return GRIT_OK;
}

static grit_err load_lifecycle(const jcfg *j, json_t *g, const char *p, const char *base_dir,
                               cluster_group *grp)
{
    grit_err rc;
    json_t *lc = NULL;
    char lp[256], f[256];
    sfmt(lp, sizeof lp, "%s.LifeCycleConfig", p);
    if ((rc = jcfg_obj(j, g, p, "LifeCycleConfig", &lc)) != GRIT_OK)
        return rc;
    if (!lc)
        return jcfg_fail(j, lp, "missing; expected {\"SourceS3Uri\": DIR, \"OnCreate\": SCRIPT}");
    static const char *const keys[] = {"SourceS3Uri", "OnCreate", NULL};
    if ((rc = jcfg_only(j, lc, lp, keys)) != GRIT_OK)
        return rc;
    const char *src, *oc;
    if ((rc = need_str(j, lc, lp, "SourceS3Uri", "a directory of lifecycle scripts (a local path "
                                                 "or file://)", &src)) != GRIT_OK ||
        (rc = need_str(j, lc, lp, "OnCreate", "the name of a script in SourceS3Uri", &oc)) != GRIT_OK)
        return rc;
    sfmt(f, sizeof f, "%s.SourceS3Uri", lp);
    if (!strncmp(src, "s3://", 5))
        return jcfg_fail(j, f, "s3:// sources are not supported yet; expected a local directory "
                               "(copy the scripts with `aws s3 sync`), got \"%s\"", src);
    if (!strncmp(src, "file://", 7))
        src += 7;
    char path[PATH_MAX * 2];
    if (src[0] == '/')
        sfmt(path, sizeof path, "%s", src);
    else
        sfmt(path, sizeof path, "%s/%s", base_dir, src);
    char *abs = realpath(path, NULL);
    struct stat st;
    if (!abs || stat(abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(abs);
        return jcfg_fail(j, f, "expected an existing directory, got \"%s\" (%s)", src,
                         abs ? "not a directory" : strerror(errno));
    }
    if (strlen(abs) >= sizeof grp->source) {
        free(abs);
        return jcfg_fail(j, f, "path too long");
    }
    sfmt(grp->source, sizeof grp->source, "%s", abs);
    free(abs);
    sfmt(f, sizeof f, "%s.OnCreate", lp);
    if (strchr(oc, '/') || !strcmp(oc, "..") || strlen(oc) >= sizeof grp->on_create)
        return jcfg_fail(j, f, "expected a file name inside SourceS3Uri, got \"%s\"", oc);
    sfmt(path, sizeof path, "%s/%s", grp->source, oc);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return jcfg_fail(j, f, "expected a script in %s, but %s is missing or not a file",
                         grp->source, oc);
    sfmt(grp->on_create, sizeof grp->on_create, "%s", oc);
    return GRIT_OK;
}

/* Hosts: an array of InstanceCount + WarmSpares host addresses (checked against "Ssh" by
 * the caller). */
static grit_err load_hosts(const jcfg *j, json_t *g, const char *p, cluster_group *grp)
{
    json_t *h = json_object_get(g, "Hosts");
    grp->nhosts = -1;
    if (!h)
        return GRIT_OK;
    char f[96];
    sfmt(f, sizeof f, "%s.Hosts", p);
    size_t want = (size_t)(grp->count + grp->spares);
    if (!json_is_array(h) || json_array_size(h) != want)
        return jcfg_fail(j, f, "expected an array of %zu host addresses (InstanceCount + "
                               "WarmSpares), got %s%zu", want, json_is_array(h) ? "" : "a non-array ",
                         json_is_array(h) ? json_array_size(h) : 0);
    size_t i;
    json_t *x;
    json_array_foreach(h, i, x) {
        const char *v = json_string_value(x);
        int ok = v && *v && strlen(v) < sizeof grp->hosts[0] && v[0] != '-';
        for (const char *q = v; ok && *q; q++)
            ok = isalnum((unsigned char)*q) || strchr(".-_:", *q);
        if (!ok) {
            sfmt(f, sizeof f, "%s.Hosts[%zu]", p, i);
            return jcfg_fail(j, f, "expected a host name or address (letters, digits, '.', '-', "
                                   "'_', ':')");
        }
        sfmt(grp->hosts[i], sizeof grp->hosts[0], "%s", v);
    }
    grp->nhosts = (int)want;
    return GRIT_OK;
}

/* A file named by field key of o (relative to base_dir) that must exist: *out absolute. */
static grit_err need_file(const jcfg *j, json_t *o, const char *prefix, const char *key,
                          const char *base_dir, char *out, size_t cap)
{
    const char *v;
    char f[96], path[PATH_MAX * 2];
    grit_err rc = need_str(j, o, prefix, key, "a file path", &v);
    if (rc != GRIT_OK)
        return rc;
    sfmt(f, sizeof f, "%s.%s", prefix, key);
    if (v[0] == '/')
        sfmt(path, sizeof path, "%s", v);
    else
        sfmt(path, sizeof path, "%s/%s", base_dir, v);
    char *abs = realpath(path, NULL);
    struct stat st;
    if (!abs || stat(abs, &st) != 0 || !S_ISREG(st.st_mode) || strlen(abs) >= cap) {
        free(abs);
        return jcfg_fail(j, f, "expected an existing file, got \"%s\"", v);
    }
    sfmt(out, cap, "%s", abs);
    free(abs);
    return GRIT_OK;
}

/* "Ssh": the ssh provider's settings. */
static grit_err load_ssh(const jcfg *j, cluster_spec *s, const char *base_dir)
{
    grit_err rc;
    json_t *o = NULL;
    if ((rc = jcfg_obj(j, j->root, "", "Ssh", &o)) != GRIT_OK || !o)
        return rc;
    static const char *const keys[] = {"User", "IdentityFile", "KnownHosts", "Port", "RemoteDir",
                                       NULL};
    if ((rc = jcfg_only(j, o, "Ssh", keys)) != GRIT_OK)
        return rc;
    const char *user = "root", *rd = "/var/lib/grit-node";
    long port = 22;
    if ((rc = jcfg_str(j, o, "Ssh", "User", NULL, &user)) != GRIT_OK ||
        (rc = jcfg_str(j, o, "Ssh", "RemoteDir", NULL, &rd)) != GRIT_OK ||
        (rc = jcfg_int(j, o, "Ssh", "Port", 1, 65535, &port)) != GRIT_OK)
        return rc;
    user = user ? user : "root";
    rd = rd ? rd : "/var/lib/grit-node";
    if (!valid_name(user))
        return jcfg_fail(j, "Ssh.User", "expected a user name (letters, digits, '-'), got \"%s\"",
                         user);
    int ok = rd[0] == '/' && strlen(rd) > 1 && strlen(rd) < sizeof s->remote_dir;
    for (const char *q = rd; ok && *q; q++)
        ok = isalnum((unsigned char)*q) || strchr("/._-", *q);
    if (!ok || strstr(rd, ".."))
        return jcfg_fail(j, "Ssh.RemoteDir", "expected an absolute path of letters, digits, "
                                             "'/', '.', '_', '-' (no ..), got \"%s\"", rd);
    if ((rc = need_file(j, o, "Ssh", "IdentityFile", base_dir, s->ssh_key, sizeof s->ssh_key)) !=
            GRIT_OK ||
        (rc = need_file(j, o, "Ssh", "KnownHosts", base_dir, s->ssh_known, sizeof s->ssh_known)) !=
            GRIT_OK)
        return rc;
    s->ssh = 1;
    s->ssh_port = (int)port;
    sfmt(s->ssh_user, sizeof s->ssh_user, "%s", user);
    sfmt(s->remote_dir, sizeof s->remote_dir, "%s", rd);
    return GRIT_OK;
}

static grit_err load_group(const jcfg *j, json_t *g, size_t i, const char *base_dir,
                           cluster_group *grp)
{
    grit_err rc;
    char p[64];
    sfmt(p, sizeof p, "InstanceGroups[%zu]", i);
    if (!json_is_object(g))
        return jcfg_fail(j, p, "expected an object (an instance group)");
    static const char *const keys[] = {"InstanceGroupName", "InstanceType", "InstanceCount",
                                       "LifeCycleConfig", "ThreadsPerCore", "Role", "WarmSpares",
                                       "ExecutionRole", "Hosts", NULL};
    if ((rc = jcfg_only(j, g, p, keys)) != GRIT_OK)
        return rc;
    const char *name, *type, *role = "worker";
    char f[96];
    if ((rc = need_str(j, g, p, "InstanceGroupName", "a group name", &name)) != GRIT_OK)
        return rc;
    sfmt(f, sizeof f, "%s.InstanceGroupName", p);
    if (!valid_name(name))
        return jcfg_fail(j, f, "expected 1-63 letters, digits and inner hyphens, got \"%s\"", name);
    sfmt(grp->name, sizeof grp->name, "%s", name);
    if ((rc = need_str(j, g, p, "InstanceType", "an instance type such as \"ml.g5.xlarge\"",
                       &type)) != GRIT_OK)
        return rc;
    sfmt(f, sizeof f, "%s.InstanceType", p);
    if (!valid_type(type))
        return jcfg_fail(j, f, "expected letters, digits, '.', '_' or '-', got \"%s\"", type);
    sfmt(grp->type, sizeof grp->type, "%s", type);
    static const char *const roles[] = {"controller", "login", "worker", NULL};
    if ((rc = jcfg_str(j, g, p, "Role", roles, &role)) != GRIT_OK)
        return rc;
    grp->role = !strcmp(role, "controller") ? CLUSTER_CONTROLLER
                : !strcmp(role, "login")    ? CLUSTER_LOGIN
                                            : CLUSTER_WORKER;
    long count = -1, tpc = 1, spares = 0;
    if ((rc = jcfg_int(j, g, p, "InstanceCount", 0, CLUSTER_MAX_NODES, &count)) != GRIT_OK)
        return rc;
    sfmt(f, sizeof f, "%s.InstanceCount", p);
    if (count < 0)
        return jcfg_fail(j, f, "missing; expected an integer in [0, %d]", CLUSTER_MAX_NODES);
    if (grp->role == CLUSTER_CONTROLLER && count != 1)
        return jcfg_fail(j, f, "a controller group has exactly 1 instance, got %ld", count);
    if ((rc = jcfg_int(j, g, p, "ThreadsPerCore", 1, 2, &tpc)) != GRIT_OK ||
        (rc = jcfg_int(j, g, p, "WarmSpares", 0, CLUSTER_MAX_NODES, &spares)) != GRIT_OK)
        return rc;
    sfmt(f, sizeof f, "%s.WarmSpares", p);
    if (spares > 0 && grp->role != CLUSTER_WORKER)
        return jcfg_fail(j, f, "only worker groups keep warm spares (this group is %s)", role);
    grp->count = (int)count;
    grp->threads_per_core = (int)tpc;
    grp->spares = (int)spares;
    if ((rc = load_hosts(j, g, p, grp)) != GRIT_OK)
        return rc;
    return load_lifecycle(j, g, p, base_dir, grp);
}

static grit_err load_network(const jcfg *j, cluster_spec *s)
{
    grit_err rc;
    json_t *n = NULL;
    sfmt(s->bridge, sizeof s->bridge, "gritc0");
    sfmt(s->subnet, sizeof s->subnet, "10.79.0");
    s->port = 18200;
    if ((rc = jcfg_obj(j, j->root, "", "Network", &n)) != GRIT_OK || !n)
        return rc;
    static const char *const keys[] = {"Bridge", "Subnet", "Port", NULL};
    if ((rc = jcfg_only(j, n, "Network", keys)) != GRIT_OK)
        return rc;
    const char *b = NULL, *sub = NULL;
    long port = s->port;
    if ((rc = jcfg_str(j, n, "Network", "Bridge", NULL, &b)) != GRIT_OK ||
        (rc = jcfg_str(j, n, "Network", "Subnet", NULL, &sub)) != GRIT_OK ||
        (rc = jcfg_int(j, n, "Network", "Port", 1024, 65000 - CLUSTER_MAX_NODES, &port)) != GRIT_OK)
        return rc;
    if (b) {
        int ok = strlen(b) <= 11 && islower((unsigned char)b[0]);
        for (const char *q = b; *q && ok; q++)
            ok = islower((unsigned char)*q) || isdigit((unsigned char)*q);
        if (!ok)
            return jcfg_fail(j, "Network.Bridge", "expected 1-11 lower-case letters and digits "
                                                  "starting with a letter, got \"%s\"", b);
        sfmt(s->bridge, sizeof s->bridge, "%s", b);
    }
    if (sub) {
        unsigned a, bb, c;
        char extra;
        if (sscanf(sub, "%u.%u.%u%c", &a, &bb, &c, &extra) != 3 || a > 255 || bb > 255 || c > 255)
            return jcfg_fail(j, "Network.Subnet", "expected the first three octets of a /24 "
                                                  "such as \"10.79.0\", got \"%s\"", sub);
        sfmt(s->subnet, sizeof s->subnet, "%u.%u.%u", a, bb, c);
    }
    s->port = (int)port;
    return GRIT_OK;
}

grit_err cluster_spec_parse(cluster_spec *s, const char *name, const char *text,
                            const char *base_dir)
{
    memset(s, 0, sizeof *s);
    jcfg j;
    grit_err rc = jcfg_open_string(&j, name, text);
    if (rc != GRIT_OK) {
        memset(s, 0, sizeof *s);
        return rc;
    }
    sfmt(s->file, sizeof s->file, "%s", name);
    static const char *const keys[] = {"ClusterName", "InstanceGroups", "Network", "VpcConfig",
                                       "Tags", "Orchestrator", "NodeRecovery", "Ssh", NULL};
    TRY(jcfg_only(&j, j.root, "", keys));
    const char *cn;
    TRY(need_str(&j, j.root, "", "ClusterName", "a cluster name", &cn));
    if (!valid_name(cn)) {
        rc = jcfg_fail(&j, "ClusterName", "expected 1-63 letters, digits and inner hyphens, "
                                          "got \"%s\"", cn);
        goto out;
    }
    sfmt(s->name, sizeof s->name, "%s", cn);
    TRY(load_network(&j, s));
    TRY(load_ssh(&j, s, base_dir));
    json_t *groups = json_object_get(j.root, "InstanceGroups");
    if (!groups) {
        rc = jcfg_fail(&j, "InstanceGroups", "missing; expected an array of instance groups");
        goto out;
    }
    if (!json_is_array(groups) || json_array_size(groups) == 0 ||
        json_array_size(groups) > CLUSTER_MAX_GROUPS) {
        rc = jcfg_fail(&j, "InstanceGroups", "expected an array of 1 to %d instance groups",
                       CLUSTER_MAX_GROUPS);
        goto out;
    }
    size_t i;
    json_t *g;
    int total = 0, controllers = 0;
    json_array_foreach(groups, i, g) {
        cluster_group *grp = &s->groups[i];
        TRY(load_group(&j, g, i, base_dir, grp));
        char f[96];
        for (size_t k = 0; k < i; k++)
            if (!strcmp(s->groups[k].name, grp->name)) {
                sfmt(f, sizeof f, "InstanceGroups[%zu].InstanceGroupName", i);
                rc = jcfg_fail(&j, f, "duplicate group name \"%s\" (also InstanceGroups[%zu]); "
                                      "expected a unique name", grp->name, k);
                goto out;
            }
        if ((grp->nhosts >= 0) != (s->ssh != 0)) {
            sfmt(f, sizeof f, "InstanceGroups[%zu].Hosts", i);
            rc = jcfg_fail(&j, f, s->ssh ? "missing; with \"Ssh\" every group lists its hosts "
                                           "(InstanceCount + WarmSpares addresses)"
                                         : "only for the ssh provider; expected no \"Hosts\" "
                                           "without a top-level \"Ssh\" object");
            goto out;
        }
        for (size_t k = 0; k <= i; k++)
            for (int a = 0; a < s->groups[k].nhosts; a++)
                for (int b = 0; b < grp->nhosts; b++)
                    if ((k < i || a < b) && !strcmp(s->groups[k].hosts[a], grp->hosts[b])) {
                        sfmt(f, sizeof f, "InstanceGroups[%zu].Hosts[%d]", i, b);
                        rc = jcfg_fail(&j, f, "host \"%s\" is listed twice (also "
                                              "InstanceGroups[%zu].Hosts[%d]); expected one node "
                                              "per host", grp->hosts[b], k, a);
                        goto out;
                    }
        controllers += grp->role == CLUSTER_CONTROLLER;
        total += grp->count + grp->spares;
        s->ngroups = (int)i + 1;
    }
    if (controllers != 1) {
        rc = jcfg_fail(&j, "InstanceGroups", "expected exactly one group with \"Role\": "
                                             "\"controller\" (the Slurm controller), found %d",
                       controllers);
        goto out;
    }
    if (total > CLUSTER_MAX_NODES) {
        rc = jcfg_fail(&j, "InstanceGroups", "expected at most %d nodes in all (InstanceCount "
                                             "+ WarmSpares), got %d", CLUSTER_MAX_NODES, total);
        goto out;
    }
out:
    jcfg_close(&j);
    if (rc != GRIT_OK)
        memset(s, 0, sizeof *s);
    return rc;
}

grit_err cluster_spec_load(cluster_spec *s, const char *path)
{
    char *text = NULL;
    memset(s, 0, sizeof *s);
    grit_err rc = fs_read_all(path, &text, NULL);
    if (rc != GRIT_OK)
        return rc;
    char dir[PATH_MAX];
    sfmt(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        sfmt(dir, sizeof dir, ".");
    rc = cluster_spec_parse(s, path, text, dir);
    free(text);
    return rc;
}
