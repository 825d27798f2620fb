/*
 * ckpt_mp.c - model-parallel checkpoints (tensor and/or pipeline parallelism): each rank
 * of replica 0 writes its own slices, the manifest says which slice of which Hugging
 * Face tensor each file holds, and a reader of any layout assembles whole tensors from
 * them (ckpt.h, docs/formats.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_internal.h"
#include "ckpt/safetensors.h"
#include "model/tp.h"

void ckpt_mp_name(char *buf, size_t cap, int tp_rank, int tp, int pp_rank, int pp)
{
    snprintf(buf, cap, "model-tp%d-of-%d-pp%d-of-%d.safetensors", tp_rank, tp, pp_rank, pp);
}

int ckpt__mp_parse(const char *name, int *t, int *T, int *p, int *P)
{
    int len = 0;
    return sscanf(name, "model-tp%d-of-%d-pp%d-of-%d.safetensors%n", t, T, p, P, &len) == 4 &&
           name[len] == '\0' && *T > 0 && *P > 0 && *t >= 0 && *t < *T && *p >= 0 && *p < *P &&
           *T <= 4096 && *P <= 4096;
}

bool ckpt__mp_keeps(const gx_tensor *t, int tp_rank)
{
    /* a replicated kv head's copy (model/tp.h): all its segments another rank's */
    bool copy = t->kv_copy && t->kv_copy == (1u << (t->split >= 0 ? t->nseg : 1)) - 1;
    return !t->tied_copy && !copy && (t->split >= 0 || tp_rank == 0);
}

json_t *ckpt__mp_slices(const gx_config *cfg, int t, int T, int p, int P)
{
    gx_tensor *lay = NULL;
    int n = 0;
    size_t np = 0;
    if (gx_stage_layout(cfg, T, t, P, p, &lay, &n, &np) != GRIT_OK)
        return NULL;
    json_t *o = json_object();
    for (int i = 0; o && i < n; i++) {
        const gx_tensor *x = &lay[i];
        if (!ckpt__mp_keeps(x, t))
            continue;
        json_t *segs = json_array();
        for (int s = 0; x->split >= 0 && s < x->nseg; s++)
            if (!(x->kv_copy >> s & 1)) /* another rank writes a replicated kv head */
                json_array_append_new(segs, json_pack("[i,i,i]", x->seg[s][0], x->seg[s][1],
                                                  x->seg[s][2]));
        json_t *shape = x->ndim == 2 ? json_pack("[i,i]", x->gshape[0], x->gshape[1])
                                     : json_pack("[i]", x->gshape[0]);
        json_object_set_new(o, x->name, json_pack("{s:o,s:i,s:o}", "shape", shape, "dim",
                                                  (int)x->split, "segs", segs));
    }
    free(lay);
    return o;
}

grit_err ckpt__mp_check(json_t *files, int *found, char *why, size_t cap)
{
    int T0 = 0, P0 = 0, n = 0;
    unsigned char *seen = NULL;
    *found = 0;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i), *nm = json_object_get(f, "name");
        int t, T, p, P;
        if (!json_is_string(nm) || !ckpt__mp_parse(json_string_value(nm), &t, &T, &p, &P))
            continue;
        if (!seen) {
            T0 = T;
            P0 = P;
            if (!(seen = calloc((size_t)T * (size_t)P, 1))) {
                snprintf(why, cap, "manifest.json: out of memory");
                return GRIT_EFORMAT;
            }
        }
        if (T != T0 || P != P0 || seen[p * T + t]++ ||
            !json_is_object(json_object_get(f, "tensors"))) {
            snprintf(why, cap, "manifest.json: %s: expected one model-parallel shard per "
                               "coordinate of a %d x %d layout, each with its 'tensors' slices",
                     json_string_value(nm), T0, P0);
            free(seen);
            return GRIT_EFORMAT;
        }
        n++;
    }
    free(seen);
    if (n && n != T0 * P0) {
        snprintf(why, cap, "manifest.json: %d of the %d model-parallel shards of a tensor %d x "
                           "pipeline %d layout", n, T0 * P0, T0, P0);
        return GRIT_EFORMAT;
    }
    *found = n > 0;
    return GRIT_OK;
}

/* --- reading -------------------------------------------------------------------- */

struct ckpt_mp {
    int n;
    char (*name)[64];
    st_file *hdr;
    json_t **tens; /* each file's manifest "tensors" (borrowed from j) */
    json_t *j;
};

void ckpt__mp_free(ckpt_mp *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        st_file_free(&t->hdr[i]);
    free(t->hdr);
    free(t->name);
    free(t->tens);
    json_decref(t->j);
    free(t);
}

static const char *strip_moment(const char *name)
{
    if (!strncmp(name, "exp_avg_sq.", 11))
        return name + 11;
    if (!strncmp(name, "exp_avg.", 8))
        return name + 8;
    return name;
}

grit_err ckpt__mp_open(store *s, const char *dir, ckpt_mp **out)
{
    char path[256], why[512], *text = NULL;
    *out = NULL;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    grit_err rc = store_read_all(s, path, &text, NULL);
    if (rc == GRIT_ENOTFOUND)
        return GRIT_OK; /* a folder written by hand or by Hugging Face */
    if (rc != GRIT_OK)
        return rc;
    json_t *j = json_loads(text, 0, NULL), *files = json_object_get(j, "files");
    free(text);
    int found = 0;
    if (!json_is_array(files)) {
        json_decref(j);
        return grit_errf(GRIT_EFORMAT, "%s/%s: not a grit manifest", s->root, path);
    }
    if (ckpt__mp_check(files, &found, why, sizeof why) != GRIT_OK) {
        json_decref(j);
        return grit_errf(GRIT_EFORMAT, "%s/%s: %s", s->root, dir, why);
    }
    if (!found) {
        json_decref(j);
        return GRIT_OK;
    }
    ckpt_mp *t = calloc(1, sizeof *t);
    size_t nf = json_array_size(files);
    if (!t || !(t->name = calloc(nf, sizeof *t->name)) || !(t->hdr = calloc(nf, sizeof *t->hdr)) ||
        !(t->tens = calloc(nf, sizeof *t->tens))) {
        ckpt__mp_free(t);
        json_decref(j);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    t->j = j;
    for (size_t i = 0; rc == GRIT_OK && i < nf; i++) {
        json_t *f = json_array_get(files, i);
        const char *nm = json_string_value(json_object_get(f, "name"));
        int a, b, c, d;
        if (!nm || !ckpt__mp_parse(nm, &a, &b, &c, &d))
            continue;
        int k = t->n++;
        snprintf(t->name[k], sizeof t->name[k], "%s", nm);
        t->tens[k] = json_object_get(f, "tensors");
        char what[1400];
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        snprintf(what, sizeof what, "%s/%s", s->root, path);
        if ((rc = ckpt__open_st(s, path, what, &t->hdr[k])) != GRIT_OK)
            break;
        for (int x = 0; x < t->hdr[k].n; x++) /* nothing the manifest does not place */
            if (!json_object_get(t->tens[k], strip_moment(t->hdr[k].t[x].name))) {
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' has no slice in manifest.json",
                               what, t->hdr[k].t[x].name);
                break;
            }
    }
    if (rc != GRIT_OK) {
        ckpt__mp_free(t);
        return rc;
    }
    *out = t;
    return GRIT_OK;
}

/* One file's piece of whole tensor w: the slice description (json) checked against w's
 * shape and the file's header entry x, as a gx_tensor for gx_tp_slice_copy. */
static grit_err piece(const char *what, const char *name, const gx_tensor *w, json_t *js,
                      const st_tensor *x, gx_tensor *lt)
{
    json_t *shape = json_object_get(js, "shape"), *dim = json_object_get(js, "dim"),
           *segs = json_object_get(js, "segs");
    memset(lt, 0, sizeof *lt);
    lt->ndim = w->ndim;
    lt->gshape[0] = w->shape[0];
    lt->gshape[1] = w->ndim == 2 ? w->shape[1] : 1;
    int ok = json_is_array(shape) && (int)json_array_size(shape) == w->ndim &&
             json_is_integer(dim) && json_is_array(segs) && json_array_size(segs) <= 3;
    for (int d = 0; ok && d < w->ndim; d++)
        ok = json_integer_value(json_array_get(shape, (size_t)d)) == w->shape[d];
    long sd = ok ? (long)json_integer_value(dim) : -2;
    ok = ok && sd >= -1 && sd < w->ndim && (sd >= 0) == (json_array_size(segs) > 0);
    long extent = sd >= 0 ? w->shape[sd] : 0, local = 0;
    int have = x && x->ndim == w->ndim && sd >= 0 ? (int)x->shape[sd] : 0; /* the file's rows */
    lt->split = (signed char)sd;
    for (size_t k = 0; ok && k < json_array_size(segs); k++) {
        json_t *sg = json_array_get(segs, k);
        long g = (long)json_integer_value(json_array_get(sg, 0)),
             l = (long)json_integer_value(json_array_get(sg, 1)),
             c = (long)json_integer_value(json_array_get(sg, 2));
        ok = json_array_size(sg) == 3 && g >= 0 && l >= 0 && c > 0 && g + c <= extent &&
             l + c <= 1L << 30;
        lt->seg[k][0] = (int)g;
        lt->seg[k][1] = (int)l;
        lt->seg[k][2] = (int)c;
        local = l + c > local ? l + c : local;
        lt->nseg = (signed char)(k + 1);
    }
    if (!ok)
        return grit_errf(GRIT_EFORMAT, "%s: manifest.json: slice of '%s': expected {shape: "
                                       "the whole tensor's, dim: -1, 0 or 1, segs: up to 3 "
                                       "[global start, local start, count] inside it}",
                         what, name);
    lt->shape[0] = w->shape[0];
    lt->shape[1] = w->ndim == 2 ? w->shape[1] : 1;
    /* the file may hold more than the segments place (a replicated kv head's rows that
     * another file provides): its shape along the split, at least as long as they need */
    if (sd >= 0)
        lt->shape[sd] = have >= local ? have : (int)local;
    lt->numel = (size_t)lt->shape[0] * (size_t)lt->shape[1];
    int sh_ok = x && !strcmp(x->dtype, "F32") && x->ndim == w->ndim && x->shape[0] == lt->shape[0] &&
                (w->ndim == 1 || x->shape[1] == lt->shape[1]);
    if (!sh_ok)
        return grit_errf(GRIT_EFORMAT, "%s: tensor '%s': expected F32 [%d%s%.0d] (its slice in "
                                       "manifest.json)", what, name, lt->shape[0],
                         w->ndim == 2 ? ", " : "", w->ndim == 2 ? lt->shape[1] : 0);
    return GRIT_OK;
}

grit_err ckpt__mp_read(store *s, const char *dir, ckpt_mp *t, const gx_tensor *w,
                       const char *prefix, float *out)
{
    char name[200];
    snprintf(name, sizeof name, "%s%s", prefix, w->name);
    int extent = 1, kind = -2; /* the split dimension every piece shares */
    unsigned char *cover = NULL;
    float *buf = NULL;
    grit_err rc = GRIT_OK;
    for (int f = 0; rc == GRIT_OK && f < t->n; f++) {
        json_t *js = json_object_get(t->tens[f], w->name);
        if (!js)
            continue;
        char path[256], what[1400];
        snprintf(path, sizeof path, "%s/%s", dir, t->name[f]);
        snprintf(what, sizeof what, "%s/%s", s->root, path);
        const st_tensor *x = st_find(&t->hdr[f], name);
        gx_tensor lt;
        if ((rc = piece(what, name, w, js, x, &lt)) != GRIT_OK)
            break;
        if (kind == -2) {
            kind = lt.split;
            extent = kind >= 0 ? w->shape[kind] : 1;
            if (!(cover = calloc((size_t)extent, 1))) {
                rc = grit_errf(GRIT_ENOMEM, "out of memory");
                break;
            }
        } else if (lt.split != kind) {
            rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' is split along dimension %d here and "
                                         "%d in another shard", what, name, lt.split, kind);
            break;
        }
        for (int k = 0; k < (kind >= 0 ? lt.nseg : 1) && rc == GRIT_OK; k++) {
            int g = kind >= 0 ? lt.seg[k][0] : 0, c = kind >= 0 ? lt.seg[k][2] : 1;
            for (int e = g; e < g + c && rc == GRIT_OK; e++)
                if (cover[e]++)
                    rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': index %d along dimension %d "
                                                 "is also in another shard", what, name, e, kind);
        }
        float *nb = rc == GRIT_OK ? realloc(buf, lt.numel * sizeof(float)) : NULL;
        if (rc == GRIT_OK && !nb)
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
        if (rc != GRIT_OK)
            break;
        buf = nb;
        if ((rc = s->ops->read(s, path, t->hdr[f].data_off + x->begin, lt.numel * 4, buf)) ==
            GRIT_OK)
            gx_tp_slice_copy(&lt, out, buf, 1);
    }
    for (int e = 0; rc == GRIT_OK && e < extent; e++)
        if (!cover || !cover[e])
            rc = grit_errf(GRIT_EFORMAT, "%s/%s: tensor '%s': %s", s->root, dir, name,
                           cover ? "part of it is in no model-parallel shard"
                                 : "in no model-parallel shard");
    free(cover);
    free(buf);
    return rc;
}
