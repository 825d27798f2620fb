/* baseline.c - read and write a node's reference measurements (see baseline.h). */
#include "health/baseline.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

grit_err health_baseline_load(health_baseline *b, const char *path)
{
    memset(b, 0, sizeof *b);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return grit_errf(GRIT_EIO, "%s:%d:%d: cannot read baseline: %s", path, je.line,
                         je.column, je.text);
    grit_err rc = GRIT_OK;
    json_t *fmt = json_object_get(root, "format");
    json_t *vals = json_object_get(root, "values");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "grit-health-baseline") ||
        !json_is_object(vals)) {
        rc = grit_errf(GRIT_EFORMAT,
                       "%s: not a grit health baseline (want \"format\": "
                       "\"grit-health-baseline\" and a \"values\" object)",
                       path);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(vals, key, v)
    {
        if (!json_is_number(v)) {
            rc = grit_errf(GRIT_EFORMAT, "%s: values.%s: expected a number", path, key);
            goto out;
        }
        if (b->n < HEALTH_BASELINE_MAX) {
            snprintf(b->names[b->n], sizeof b->names[0], "%s", key);
            b->values[b->n++] = json_number_value(v);
        }
    }
    json_t *th = json_object_get(root, "threads");
    if (json_is_integer(th))
        b->threads = (int)json_integer_value(th);
    json_t *host = json_object_get(root, "host");
    if (json_is_string(host))
        snprintf(b->host, sizeof b->host, "%s", json_string_value(host));
    json_t *dg = json_object_get(json_object_get(root, "digests"), "compute.digest");
    if (json_is_string(dg))
        snprintf(b->digest, sizeof b->digest, "%s", json_string_value(dg));
out:
    json_decref(root);
    return rc;
}

int health_baseline_get(const health_baseline *b, const char *name, double *out)
{
    if (!b)
        return 0;
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->names[i], name)) {
            *out = b->values[i];
            return 1;
        }
    return 0;
}

grit_err health_baseline_save(const health_report *r, int threads, const char *digest,
                              const char *path)
{
    json_t *root = json_object(), *vals = json_object(), *dg = json_object();
    json_object_set_new(root, "format", json_string("grit-health-baseline"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "host", json_string(r->host));
    json_object_set_new(root, "threads", json_integer(threads));
    json_object_set_new(root, "mode", json_string(r->mode == HEALTH_DEEP ? "deep" : "quick"));
    for (int i = 0; i < r->n; i++) {
        const health_result *res = &r->results[i];
        if (res->verdict != HEALTH_FAIL && res->verdict != HEALTH_ERROR && res->unit[0] &&
            isfinite(res->measured) && strstr(res->name, "_kat") == NULL)
            json_object_set_new(vals, res->name, json_real(res->measured));
    }
    json_object_set_new(root, "values", vals);
    if (digest && *digest)
        json_object_set_new(dg, "compute.digest", json_string(digest));
    json_object_set_new(root, "digests", dg);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "baseline: cannot serialise");
    size_t len = strlen(s);
    s[len] = '\0';
    grit_err rc = GRIT_OK;
    char *buf = malloc(len + 2);
    if (!buf) {
        rc = grit_errf(GRIT_ENOMEM, "baseline: out of memory");
    } else {
        memcpy(buf, s, len);
        buf[len] = '\n';
        rc = fs_write_durable(path, buf, len + 1);
    }
    free(buf);
    free(s);
    return rc;
}
