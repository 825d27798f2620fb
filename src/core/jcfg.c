/* jcfg.c - JSON config getters with file:line:col error messages (see jcfg.h). */
#include "core/jcfg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

static grit_err open_common(jcfg *c, const char *name)
{
    json_error_t je;
    c->file = strdup(name);
    if (!c->file)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    c->root = json_loads(c->text, JSON_REJECT_DUPLICATES, &je);
    if (!c->root)
        return grit_errf(GRIT_ECONFIG, "%s:%d:%d: invalid JSON: %s", name, je.line, je.column, je.text);
    if (!json_is_object(c->root))
        return grit_errf(GRIT_ECONFIG, "%s:1:1: expected a JSON object at the top level", name);
    return GRIT_OK;
}

grit_err jcfg_open(jcfg *c, const char *path)
{
    memset(c, 0, sizeof *c);
    grit_err rc = fs_read_all(path, &c->text, NULL);
    if (rc == GRIT_OK)
        rc = open_common(c, path);
    if (rc != GRIT_OK)
        jcfg_close(c);
    return rc;
}

grit_err jcfg_open_string(jcfg *c, const char *name, const char *text)
{
    memset(c, 0, sizeof *c);
    c->text = strdup(text);
    grit_err rc = c->text ? open_common(c, name) : grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc != GRIT_OK)
        jcfg_close(c);
    return rc;
}

void jcfg_close(jcfg *c)
{
    if (!c)
        return;
    json_decref(c->root);
    free(c->text);
    free(c->file);
    memset(c, 0, sizeof *c);
}

/* --- locating a key path in the raw text ----------------------------------- */

typedef struct scan {
    const char *p, *end;
    const char *target; /* dotted path */
    char path[512];     /* current dotted path */
    const char *hit;    /* position of the matching key */
} scan;

static void skip_ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* Copies a JSON string's raw contents (escapes kept) into buf; p at '"'. */
static void scan_string(scan *s, char *buf, size_t cap)
{
    size_t n = 0;
    s->p++;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\' && s->p + 1 < s->end) {
            if (buf && n + 1 < cap)
                buf[n++] = *s->p;
            s->p++;
        }
        if (buf && n + 1 < cap)
            buf[n++] = *s->p;
        s->p++;
    }
    if (s->p < s->end)
        s->p++;
    if (buf)
        buf[n] = '\0';
}

static void scan_value(scan *s, int depth);

static void scan_object(scan *s, int depth)
{
    size_t base = strlen(s->path);
    s->p++;
    for (;;) {
        skip_ws(s);
        if (s->p >= s->end || *s->p == '}') {
            s->p++;
            break;
        }
        if (*s->p == ',') {
            s->p++;
            continue;
        }
        if (*s->p != '"')
            return; /* malformed: jansson already rejected it */
        const char *keypos = s->p;
        char key[256];
        scan_string(s, key, sizeof key);
        snprintf(s->path + base, sizeof s->path - base, "%s%s", base ? "." : "", key);
        if (!s->hit && strcmp(s->path, s->target) == 0)
            s->hit = keypos;
        skip_ws(s);
        if (s->p < s->end && *s->p == ':')
            s->p++;
        scan_value(s, depth + 1);
        s->path[base] = '\0';
    }
}

static void scan_value(scan *s, int depth)
{
    skip_ws(s);
    if (s->p >= s->end || depth > 64)
        return;
    if (*s->p == '{')
        scan_object(s, depth);
    else if (*s->p == '[') {
        /* element k of the array at path P is "P[k]" */
        size_t base = strlen(s->path);
        long k = 0;
        s->p++;
        for (;;) {
            skip_ws(s);
            if (s->p >= s->end || *s->p == ']') {
                s->p++;
                break;
            }
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            snprintf(s->path + base, sizeof s->path - base, "[%ld]", k++);
            if (!s->hit && strcmp(s->path, s->target) == 0)
                s->hit = s->p;
            scan_value(s, depth + 1);
            s->path[base] = '\0';
        }
    } else if (*s->p == '"')
        scan_string(s, NULL, 0);
    else
        while (s->p < s->end && !strchr(",}] \t\r\n", *s->p))
            s->p++;
}

void jcfg_locate(const jcfg *c, const char *path, int *line, int *col)
{
    scan s = {.p = c->text, .end = c->text + strlen(c->text), .target = path};
    scan_value(&s, 0);
    *line = *col = 0;
    if (!s.hit)
        return;
    *line = 1;
    *col = 1;
    for (const char *q = c->text; q < s.hit; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else
            (*col)++;
    }
}

grit_err jcfg_fail(const jcfg *c, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    jcfg_locate(c, path, &line, &col);
    /* a missing key: point at the nearest enclosing object or element that exists */
    char up[256];
    snprintf(up, sizeof up, "%s", path);
    while (line == 0) {
        char *dot = strrchr(up, '.'), *br = strrchr(up, '[');
        char *cut = dot > br ? dot : br;
        if (!cut || cut == up)
            break;
        *cut = '\0';
        jcfg_locate(c, up, &line, &col);
    }
    if (line > 0)
        return grit_errf(GRIT_ECONFIG, "%s:%d:%d: field '%s': %s", c->file, line, col, path, msg);
    return grit_errf(GRIT_ECONFIG, "%s: field '%s': %s", c->file, path, msg);
}

/* --- typed getters ----------------------------------------------------------- */

static void join(char *buf, size_t cap, const char *prefix, const char *key)
{
    snprintf(buf, cap, "%s%s%s", prefix, *prefix ? "." : "", key);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

grit_err jcfg_only(const jcfg *c, json_t *obj, const char *prefix, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(*a, key) == 0;
        if (!ok) {
            char path[256], list[512] = "";
            join(path, sizeof path, prefix, key);
            for (const char *const *a = allowed; *a; a++) {
                size_t n = strlen(list);
                snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *a);
            }
            return jcfg_fail(c, path, "unknown field; expected one of: %s", list);
        }
    }
    return GRIT_OK;
}

grit_err jcfg_int(const jcfg *c, json_t *obj, const char *prefix, const char *key,
                  long lo, long hi, long *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return GRIT_OK;
    char path[256];
    join(path, sizeof path, prefix, key);
    if (!json_is_integer(v))
        return jcfg_fail(c, path, "expected an integer in [%ld, %ld], got %s", lo, hi, type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return jcfg_fail(c, path, "expected an integer in [%ld, %ld], got %lld", lo, hi, (long long)x);
    *out = (long)x;
    return GRIT_OK;
}

grit_err jcfg_num(const jcfg *c, json_t *obj, const char *prefix, const char *key,
                  double lo, double hi, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return GRIT_OK;
    char path[256];
    join(path, sizeof path, prefix, key);
    if (!json_is_number(v))
        return jcfg_fail(c, path, "expected a number in [%g, %g], got %s", lo, hi, type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return jcfg_fail(c, path, "expected a number in [%g, %g], got %g", lo, hi, x);
    *out = x;
    return GRIT_OK;
}

grit_err jcfg_bool(const jcfg *c, json_t *obj, const char *prefix, const char *key, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return GRIT_OK;
    if (!json_is_boolean(v)) {
        char path[256];
        join(path, sizeof path, prefix, key);
        return jcfg_fail(c, path, "expected true or false, got %s", type_name(v));
    }
    *out = json_is_true(v);
    return GRIT_OK;
}

grit_err jcfg_str(const jcfg *c, json_t *obj, const char *prefix, const char *key,
                  const char *const *choices, const char **out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return GRIT_OK;
    char path[256], list[512] = "";
    join(path, sizeof path, prefix, key);
    for (const char *const *a = choices; a && *a; a++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s\"%s\"", n ? ", " : "", *a);
    }
    if (!json_is_string(v))
        return jcfg_fail(c, path, "expected %s%s, got %s", choices ? "one of " : "a string",
                         list, type_name(v));
    const char *s = json_string_value(v);
    if (choices) {
        int ok = 0;
        for (const char *const *a = choices; *a; a++)
            ok |= strcmp(*a, s) == 0;
        if (!ok)
            return jcfg_fail(c, path, "expected one of %s, got \"%s\"", list, s);
    } else if (!*s)
        return jcfg_fail(c, path, "expected a non-empty string");
    *out = s;
    return GRIT_OK;
}

grit_err jcfg_obj(const jcfg *c, json_t *obj, const char *prefix, const char *key, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v)
        return GRIT_OK;
    if (!json_is_object(v)) {
        char path[256];
        join(path, sizeof path, prefix, key);
        return jcfg_fail(c, path, "expected an object, got %s", type_name(v));
    }
    *out = v;
    return GRIT_OK;
}
