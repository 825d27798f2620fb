/* safetensors.c - durable safetensors writer (see safetensors.h). */
#include "ckpt/safetensors.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

size_t st_dtype_size(const char *dt)
{
    if (!strcmp(dt, "F32") || !strcmp(dt, "I32") || !strcmp(dt, "U32"))
        return 4;
    if (!strcmp(dt, "F16") || !strcmp(dt, "BF16") || !strcmp(dt, "I16") || !strcmp(dt, "U16"))
        return 2;
    if (!strcmp(dt, "F64") || !strcmp(dt, "I64") || !strcmp(dt, "U64"))
        return 8;
    if (!strcmp(dt, "U8") || !strcmp(dt, "I8") || !strcmp(dt, "BOOL"))
        return 1;
    return 0;
}

/* Bytes of entry e's data (0 for an unknown dtype). */
static size_t entry_bytes(const st_entry *e)
{
    size_t numel = 1;
    for (int d = 0; d < e->ndim; d++)
        numel *= (size_t)e->shape[d];
    return numel * st_dtype_size(e->dtype);
}

grit_err st_header(const st_entry *e, int n, char **out, size_t *outlen)
{
    grit_err rc = GRIT_OK;
    json_t *hdr = json_object();
    char *text = NULL;
    *out = NULL;
    if (!hdr)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    json_object_set_new(hdr, "__metadata__", json_pack("{s:s}", "format", "pt"));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (!st_dtype_size(e[i].dtype)) {
            rc = grit_errf(GRIT_EINVAL, "tensor '%s': unknown dtype '%s'", e[i].name,
                           e[i].dtype);
            goto out;
        }
        json_t *shape = json_array();
        for (int d = 0; d < e[i].ndim; d++)
            json_array_append_new(shape, json_integer(e[i].shape[d]));
        size_t bytes = entry_bytes(&e[i]);
        json_object_set_new(hdr, e[i].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", e[i].dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + bytes)));
        off += bytes;
    }
    text = json_dumps(hdr, JSON_PRESERVE_ORDER | JSON_COMPACT);
    if (!text) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    size_t hl = strlen(text), padded = (hl + 7) & ~(size_t)7;
    char *head = malloc(8 + padded);
    if (!head) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t le = padded;
    for (int b = 0; b < 8; b++)
        head[b] = (char)((le >> (8 * b)) & 0xff);
    memcpy(head + 8, text, hl);
    memset(head + 8 + hl, ' ', padded - hl);
    *out = head;
    *outlen = 8 + padded;
out:
    free(text);
    json_decref(hdr);
    return rc;
}

grit_err st_stream_open(st_stream *w, const char *path, const st_entry *e, int n)
{
    memset(w, 0, sizeof *w);
    w->f.fd = -1;
    char *head = NULL;
    size_t hl = 0;
    w->off = calloc((size_t)n + 1, sizeof *w->off);
    w->done = calloc((size_t)n + 1, 1);
    grit_err rc = !w->off || !w->done ? grit_errf(GRIT_ENOMEM, "out of memory")
                                      : st_header(e, n, &head, &hl);
    if (rc != GRIT_OK) {
        if (rc != GRIT_ENOMEM)
            rc = grit_errf(rc, "%s: %s", path, grit_errmsg());
        st_stream_abort(w);
        return rc;
    }
    w->n = n;
    size_t at = hl; /* where each tensor's bytes go: back to back after the header */
    for (int i = 0; i < n; i++) {
        w->off[i] = at;
        at += entry_bytes(&e[i]);
    }
    w->off[n] = at;
    if ((rc = fs_stream_open(&w->f, path)) == GRIT_OK)
        rc = fs_stream_write(&w->f, head, hl, 0);
    free(head);
    if (rc != GRIT_OK)
        st_stream_abort(w);
    return rc;
}

grit_err st_stream_put(st_stream *w, int i, const void *data)
{
    if (i < 0 || i >= w->n || w->done[i])
        return grit_errf(GRIT_EINVAL, "%s: tensor %d of %d %s", w->f.path, i, w->n,
                         i >= 0 && i < w->n ? "written twice" : "out of range");
    grit_err rc = fs_stream_write(&w->f, data, w->off[i + 1] - w->off[i], w->off[i]);
    w->done[i] = rc == GRIT_OK;
    return rc;
}

grit_err st_stream_commit(st_stream *w)
{
    for (int i = 0; i < w->n; i++)
        if (!w->done[i]) {
            grit_err rc = grit_errf(GRIT_EINVAL, "%s: tensor %d of %d was never written",
                                    w->f.path, i, w->n);
            st_stream_abort(w);
            return rc;
        }
    grit_err rc = fs_stream_commit(&w->f);
    free(w->off);
    free(w->done);
    w->off = NULL;
    w->done = NULL;
    return rc;
}

void st_stream_abort(st_stream *w)
{
    fs_stream_abort(&w->f);
    free(w->off);
    free(w->done);
    w->off = NULL;
    w->done = NULL;
}

grit_err st_write(const char *path, const st_entry *e, int n)
{
    st_stream w;
    grit_err rc = st_stream_open(&w, path, e, n);
    for (int i = 0; rc == GRIT_OK && i < n; i++)
        rc = st_stream_put(&w, i, e[i].data);
    if (rc != GRIT_OK) {
        st_stream_abort(&w);
        return rc;
    }
    return st_stream_commit(&w);
}

/* --- reading ------------------------------------------------------------------ */

static int by_begin(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

grit_err st_parse(const char *what, const char *json, size_t hlen, size_t file_size,
                  st_file *out)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(json, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return grit_errf(GRIT_EFORMAT, "%s: header is not valid JSON (%d:%d: %s)", what,
                         je.line, je.column, je.text);
    grit_err rc = GRIT_OK;
    if (!json_is_object(root)) {
        rc = grit_errf(GRIT_EFORMAT, "%s: header: expected a JSON object", what);
        goto out;
    }
    out->t = calloc(json_object_size(root) + 1, sizeof *out->t);
    if (!out->t) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    out->data_off = 8 + hlen;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__"))
            continue;
        st_tensor *t = &out->t[out->n];
        json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
               *of = json_object_get(v, "data_offsets");
        if (strlen(key) >= sizeof t->name || !json_is_object(v) || !json_is_string(dt) ||
            !json_is_array(sh) || json_array_size(sh) > 8 || !json_is_array(of) ||
            json_array_size(of) != 2 || !json_is_integer(json_array_get(of, 0)) ||
            !json_is_integer(json_array_get(of, 1))) {
            rc = grit_errf(GRIT_EFORMAT,
                           "%s: tensor '%s': expected {\"dtype\": string, \"shape\": [ints], "
                           "\"data_offsets\": [begin, end]}",
                           what, key);
            goto out;
        }
        snprintf(t->name, sizeof t->name, "%s", key);
        size_t es = st_dtype_size(json_string_value(dt)), numel = 1;
        if (!es) {
            rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': unknown dtype '%s'", what, key,
                           json_string_value(dt));
            goto out;
        }
        snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dt));
        t->ndim = (int)json_array_size(sh);
        for (int d = 0; d < t->ndim; d++) {
            json_t *x = json_array_get(sh, (size_t)d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) > (1LL << 40)) {
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': shape[%d] is not a valid size",
                               what, key, d);
                goto out;
            }
            t->shape[d] = (long)json_integer_value(x);
            if (t->shape[d] && numel > SIZE_MAX / es / (size_t)t->shape[d]) {
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': shape holds more bytes than "
                                             "any file", what, key);
                goto out;
            }
            numel *= (size_t)t->shape[d];
        }
        json_int_t b = json_integer_value(json_array_get(of, 0)),
                   e = json_integer_value(json_array_get(of, 1));
        if (b < 0 || e < b) {
            rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': data_offsets [%lld, %lld]: expected "
                                         "0 <= begin <= end", what, key, (long long)b,
                           (long long)e);
            goto out;
        }
        if ((size_t)(e - b) != numel * es) {
            rc = grit_errf(GRIT_EFORMAT,
                           "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, "
                           "shape and dtype need %zu",
                           what, key, (long long)b, (long long)e, (long long)(e - b),
                           numel * es);
            goto out;
        }
        t->begin = (size_t)b;
        t->end = (size_t)e;
        out->n++;
    }
    qsort(out->t, (size_t)out->n, sizeof *out->t, by_begin);
    size_t pos = 0;
    for (int i = 0; i < out->n; i++) {
        if (out->t[i].begin != pos) {
            rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' starts at byte %zu of the data, "
                                         "expected %zu (gap or overlap)",
                           what, out->t[i].name, out->t[i].begin, pos);
            goto out;
        }
        pos = out->t[i].end;
    }
    if (out->data_off + pos != file_size) {
        rc = grit_errf(GRIT_EFORMAT, "%s: tensors end at byte %zu but the file has %zu bytes",
                       what, out->data_off + pos, file_size);
        goto out;
    }
out:
    json_decref(root);
    if (rc != GRIT_OK)
        st_file_free(out);
    return rc;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

void st_file_free(st_file *f)
{
    if (!f)
        return;
    free(f->t);
    memset(f, 0, sizeof *f);
}
