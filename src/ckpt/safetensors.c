/* safetensors.c - durable safetensors writer (see safetensors.h). */
#include "ckpt/safetensors.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

static size_t dtype_size(const char *dt)
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

grit_err st_write(const char *path, const st_entry *e, int n)
{
    grit_err rc = GRIT_OK;
    json_t *hdr = json_object();
    const void **bufs = calloc((size_t)n + 2, sizeof *bufs);
    size_t *lens = calloc((size_t)n + 2, sizeof *lens);
    char *text = NULL, *head = NULL;
    if (!hdr || !bufs || !lens) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    json_object_set_new(hdr, "__metadata__", json_pack("{s:s}", "format", "pt"));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t es = dtype_size(e[i].dtype), numel = 1;
        if (!es) {
            rc = grit_errf(GRIT_EINVAL, "%s: tensor '%s': unknown dtype '%s'", path, e[i].name,
                           e[i].dtype);
            goto out;
        }
        json_t *shape = json_array();
        for (int d = 0; d < e[i].ndim; d++) {
            numel *= (size_t)e[i].shape[d];
            json_array_append_new(shape, json_integer(e[i].shape[d]));
        }
        json_object_set_new(hdr, e[i].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", e[i].dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + numel * es)));
        bufs[i + 2] = e[i].data;
        lens[i + 2] = numel * es;
        off += numel * es;
    }
    text = json_dumps(hdr, JSON_PRESERVE_ORDER | JSON_COMPACT);
    if (!text) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    size_t hl = strlen(text), padded = (hl + 7) & ~(size_t)7;
    head = malloc(8 + padded);
    if (!head) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t le = padded;
    for (int b = 0; b < 8; b++)
        head[b] = (char)((le >> (8 * b)) & 0xff);
    memcpy(head + 8, text, hl);
    memset(head + 8 + hl, ' ', padded - hl);
    bufs[0] = head;
    lens[0] = 8 + padded;
    bufs[1] = "";
    lens[1] = 0;
    rc = fs_write_durable_iov(path, bufs, lens, n + 2);
out:
    free(head);
    free(text);
    free(bufs);
    free(lens);
    json_decref(hdr);
    return rc;
}
