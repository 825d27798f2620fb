/*
 * ckpt_load.c - reading a committed checkpoint back: the model's parameters (from one
 * model.safetensors or the shards a model.safetensors.index.json names, F16/BF16
 * widened, Hugging Face buffers skipped), trainer_state.json, and the AdamW moments,
 * whole or resliced from the per-rank shards of any world size. See ckpt.h; saving,
 * verification and retention are ckpt.c.
 */
#include "ckpt/ckpt.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/hf_family.h"
#include "ckpt/safetensors.h"
#include "model/family.h"

/* --- load ------------------------------------------------------------------------ */

static const char *const hf_buffers[] = {"attention.bias", "attention.masked_bias",
                                         "rotary_emb.inv_freq", NULL};

static int is_buffer(const char *name)
{
    size_t n = strlen(name);
    for (const char *const *b = hf_buffers; *b; b++) {
        size_t k = strlen(*b);
        if (n >= k && !strcmp(name + n - k, *b))
            return 1;
    }
    return 0;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0)
            bits = sign;
        else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31)
        bits = sign | 0x7f800000 | (man << 13);
    else
        bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Loads every model tensor named prefixes[b] + name from dir/file into blocks[b];
 * HF buffers (is_buffer) are skipped, any other unknown tensor is an error.
 * With loaded (one flag per model tensor; one shard of a sharded checkpoint),
 * tensors absent from the file are left for other shards, those read are
 * flagged, and a tensor read twice is an error. */
/* Where load_file puts a tensor: into blocks (sink NULL), or into tmp, then handed to fn
 * as block first_block + b (ckpt_load_each). */
typedef struct sink {
    ckpt_tensor_fn fn;
    void *ctx;
    float *tmp; /* the largest tensor's numel */
    int first_block;
} sink;

static grit_err load_file(store *s, const char *dir, const char *file, const gx_model *m,
                          const char *const *prefixes, float **blocks, int nblocks,
                          unsigned char *loaded, const sink *sk)
{
    char path[256];
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
        return grit_errf(GRIT_EINVAL, "%s/%s/%s: path too long", s->root, dir, file);
    size_t fsize;
    uint8_t len8[8];
    grit_err rc = s->ops->size(s, path, &fsize);
    if (rc != GRIT_OK)
        return grit_errf(rc, "%s/%s: missing", s->root, path);
    if (fsize < 8 || (rc = s->ops->read(s, path, 0, 8, len8)) != GRIT_OK)
        return grit_errf(GRIT_EFORMAT, "%s/%s: too short for a safetensors file", s->root, path);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | len8[i];
    if (hl > fsize - 8 || hl > (100u << 20))
        return grit_errf(GRIT_EFORMAT, "%s/%s: header length %llu exceeds the file", s->root,
                         path, (unsigned long long)hl);
    char *hdr = malloc(hl + 1);
    if (!hdr)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    st_file f = {0};
    void *tmpbuf = NULL;
    char what[1400];
    snprintf(what, sizeof what, "%s/%s", s->root, path);
    if ((rc = s->ops->read(s, path, 8, hl, hdr)) != GRIT_OK ||
        (rc = st_parse(what, hdr, hl, fsize, &f)) != GRIT_OK)
        goto out;
    int matched = 0;
    for (int b = 0; b < nblocks; b++)
        for (int i = 0; i < m->num_tensors; i++) {
            const gx_tensor *t = &m->tensors[i];
            char name[200];
            snprintf(name, sizeof name, "%s%s", prefixes[b], t->name);
            const st_tensor *x = st_find(&f, name);
            if (!x && loaded)
                continue;
            if (x && loaded && loaded[i]++) {
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' is also in another shard", what,
                               name);
                goto out;
            }
            if (!x) {
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' is missing", what, name);
                goto out;
            }
            int ok = x->ndim == t->ndim && x->shape[0] == t->shape[0] &&
                     (t->ndim == 1 || x->shape[1] == t->shape[1]);
            if (!ok) {
                char want[48], got[64] = "";
                snprintf(want, sizeof want, t->ndim > 1 ? "[%d, %d]" : "[%d]", t->shape[0],
                         t->shape[1]);
                for (int d = 0; d < x->ndim; d++)
                    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%ld",
                             d ? ", " : "", x->shape[d]);
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': shape [%s] in the file, the "
                                             "model needs %s", what, name, got, want);
                goto out;
            }
            float *dst = sk ? sk->tmp : blocks[b] + t->offset;
            size_t off = f.data_off + x->begin;
            if (!strcmp(x->dtype, "F32")) {
                rc = s->ops->read(s, path, off, t->numel * 4, dst);
            } else if (!strcmp(x->dtype, "F16") || !strcmp(x->dtype, "BF16")) {
                uint16_t *h = tmpbuf = realloc(tmpbuf, t->numel * 2);
                if (!h) {
                    rc = grit_errf(GRIT_ENOMEM, "out of memory");
                    goto out;
                }
                rc = s->ops->read(s, path, off, t->numel * 2, h);
                int bf = x->dtype[0] == 'B';
                for (size_t k = 0; rc == GRIT_OK && k < t->numel; k++) {
                    if (bf) {
                        uint32_t bits = (uint32_t)h[k] << 16;
                        memcpy(&dst[k], &bits, 4);
                    } else
                        dst[k] = half_to_float(h[k]);
                }
            } else {
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s': dtype %s, expected F32, F16 or "
                                             "BF16", what, name, x->dtype);
            }
            if (rc == GRIT_OK && sk)
                rc = sk->fn(sk->ctx, sk->first_block + b, i, dst);
            if (rc != GRIT_OK)
                goto out;
            matched++;
        }
    for (int i = 0; i < f.n; i++) {
        int known = 0;
        for (int b = 0; b < nblocks && !known; b++) {
            size_t pl = strlen(prefixes[b]);
            known = !strncmp(f.t[i].name, prefixes[b], pl) && gx_find(m, f.t[i].name + pl);
        }
        if (!known && m->cfg.tied && !strcmp(f.t[i].name, "lm_head.weight")) {
            rc = grit_errf(GRIT_EFORMAT, "%s: tensor 'lm_head.weight': this model ties the LM "
                                         "head to the input embedding (tie_word_embeddings), "
                                         "so the file must not carry a separate head", what);
            goto out;
        }
        if (!known && !is_buffer(f.t[i].name)) {
            rc = grit_errf(GRIT_EFORMAT, "%s: unexpected tensor '%s' (not part of this model)",
                           what, f.t[i].name);
            goto out;
        }
    }
out:
    free(tmpbuf);
    free(hdr);
    st_file_free(&f);
    return rc;
}

grit_err ckpt_read_state(store *s, const char *dir, ckpt_state *st)
{
    char path[256], *text = NULL;
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    grit_err rc = store_read_all(s, path, &text, NULL);
    if (rc != GRIT_OK)
        return rc;
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    free(text);
    memset(st, 0, sizeof *st);
    json_int_t step = -1, ns = -1, ver = 0;
    const char *fp = NULL;
    int ws = 1, th = 0;
    double tok = 0, loss = 0;
    if (!j || json_unpack(j, "{s:I,s:I,s:F,s:{s:I},s:F,s:s,s:{s:i,s:i}}", "format_version", &ver,
                          "step", &step, "tokens", &tok, "data", "next_sample", &ns, "loss",
                          &loss, "config_fingerprint", &fp, "world", "size", &ws, "threads",
                          &th) != 0 ||
        step < 0 || ns < 0 || strlen(fp) != 16) {
        json_decref(j);
        return grit_errf(GRIT_EFORMAT, "%s/%s: expected format_version, step, tokens, "
                                       "data.next_sample, loss, config_fingerprint, world",
                         s->root, path);
    }
    if (ver != CKPT_FORMAT_VERSION) {
        json_decref(j);
        return grit_errf(GRIT_EFORMAT, "%s/%s: format_version %lld, this grit reads %d",
                         s->root, path, (long long)ver, CKPT_FORMAT_VERSION);
    }
    st->step = (long)step;
    st->next_sample = (long)ns;
    st->tokens = tok;
    st->loss = loss;
    st->world_size = ws;
    st->threads = th;
    snprintf(st->fingerprint, sizeof st->fingerprint, "%s", fp);
    json_decref(j);
    return GRIT_OK;
}

grit_err ckpt_load_moments(store *s, const char *dir, const gx_model *m, float *mm, float *vv)
{
    const char *op[2] = {"exp_avg.", "exp_avg_sq."};
    float *ob[2] = {mm, vv};
    return load_file(s, dir, "optimizer.safetensors", m, op, ob, 2, NULL, NULL);
}

/* Reads and parses the safetensors header of path. */
grit_err ckpt__open_st(store *s, const char *path, const char *what, st_file *f)
{
    size_t fsize;
    uint8_t len8[8];
    grit_err rc = s->ops->size(s, path, &fsize);
    if (rc != GRIT_OK)
        return grit_errf(rc, "%s: missing", what);
    if (fsize < 8 || s->ops->read(s, path, 0, 8, len8) != GRIT_OK)
        return grit_errf(GRIT_EFORMAT, "%s: too short for a safetensors file", what);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | len8[i];
    if (hl > fsize - 8 || hl > (1u << 20))
        return grit_errf(GRIT_EFORMAT, "%s: header length %llu exceeds the file", what,
                         (unsigned long long)hl);
    char *hdr = malloc(hl + 1);
    if (!hdr)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    if ((rc = s->ops->read(s, path, 8, hl, hdr)) == GRIT_OK)
        rc = st_parse(what, hdr, hl, fsize, f);
    free(hdr);
    return rc;
}

/* Elements [a, b) of the flat moments from one shard holding [slo, shi). */
static grit_err read_shard(store *s, const char *dir, const char *name, long slo, long shi,
                           size_t a, size_t b, float *mm, float *vv)
{
    char path[256], what[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(what, sizeof what, "%s/%s", s->root, path);
    st_file f = {0};
    grit_err rc = ckpt__open_st(s, path, what, &f);
    const char *const nm[2] = {"exp_avg", "exp_avg_sq"};
    float *dst[2] = {mm, vv};
    for (int k = 0; rc == GRIT_OK && k < 2; k++) {
        const st_tensor *x = st_find(&f, nm[k]);
        if (!x || strcmp(x->dtype, "F32") || x->ndim != 1 || x->shape[0] != shi - slo) {
            rc = grit_errf(GRIT_EFORMAT, "%s: expected tensor '%s', F32 [%ld] (the manifest's "
                                         "element range %ld..%ld)", what, nm[k], shi - slo, slo, shi);
            break;
        }
        rc = s->ops->read(s, path, f.data_off + x->begin + (a - (size_t)slo) * 4, (b - a) * 4,
                          dst[k]);
    }
    st_file_free(&f);
    return rc;
}

/* The optimiser shard table of dir's manifest: *world 0 when the moments are one
 * optimizer.safetensors (or there is no manifest: a folder written by hand). */
static grit_err shard_table(store *s, const char *dir, const gx_model *m, long **slo, long **shi,
                            int *world)
{
    char path[256], *text = NULL, why[512];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    *slo = *shi = NULL;
    *world = 0;
    grit_err rc = store_read_all(s, path, &text, NULL);
    if (rc == GRIT_ENOTFOUND)
        return GRIT_OK;
    if (rc != GRIT_OK)
        return rc;
    json_t *j = json_loads(text, 0, NULL), *files = json_object_get(j, "files");
    free(text);
    if (!json_is_array(files))
        rc = grit_errf(GRIT_EFORMAT, "%s/%s: not a grit manifest", s->root, path);
    else if (ckpt__shard_table(files, slo, shi, world, why, sizeof why) != GRIT_OK)
        rc = grit_errf(GRIT_EFORMAT, "%s/%s: %s", s->root, dir, why);
    else if (*world > 0 && (*shi)[*world - 1] != (long)m->num_params)
        rc = grit_errf(GRIT_EFORMAT, "%s/%s: optimiser shards hold %ld elements, the model has %zu",
                       s->root, dir, (*shi)[*world - 1], m->num_params);
    json_decref(j);
    if (rc != GRIT_OK) {
        free(*slo);
        free(*shi);
        *slo = *shi = NULL;
    }
    return rc;
}

/* Elements [lo, hi) from the shards (world of them) that hold [slo[r], shi[r]). */
static grit_err read_range(store *s, const char *dir, const long *slo, const long *shi, int world,
                           size_t lo, size_t hi, float *mm, float *vv)
{
    grit_err rc = GRIT_OK;
    for (int r = 0; r < world && rc == GRIT_OK; r++) {
        size_t a = (size_t)slo[r] > lo ? (size_t)slo[r] : lo;
        size_t b = (size_t)shi[r] < hi ? (size_t)shi[r] : hi;
        char name[64];
        ckpt_shard_name(name, sizeof name, r, world);
        if (a < b)
            rc = read_shard(s, dir, name, slo[r], shi[r], a, b, mm + (a - lo), vv + (a - lo));
    }
    return rc;
}

/* Elements [lo, hi) of the flat moments from model-parallel shards: every tensor that
 * overlaps the range is assembled whole, its overlap kept. */
static grit_err mp_moments_range(store *s, const char *dir, ckpt_mp *mp, const gx_model *m,
                                 size_t lo, size_t hi, float *mm, float *vv)
{
    float *tmp = malloc(sizeof(float) * gx_max_numel(m));
    grit_err rc = tmp ? GRIT_OK : grit_errf(GRIT_ENOMEM, "out of memory");
    const char *pre[2] = {"exp_avg.", "exp_avg_sq."};
    float *dst[2] = {mm, vv};
    for (int i = 0; rc == GRIT_OK && i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel;
        b = b < hi ? b : hi;
        for (int k = 0; a < b && k < 2 && rc == GRIT_OK; k++)
            if ((rc = ckpt__mp_read(s, dir, mp, t, pre[k], tmp)) == GRIT_OK)
                memcpy(dst[k] + (a - lo), tmp + (a - t->offset), (b - a) * sizeof(float));
    }
    free(tmp);
    return rc;
}

grit_err ckpt_load_moments_range(store *s, const char *dir, const gx_model *m, size_t lo,
                                 size_t hi, float *mm, float *vv)
{
    long *slo, *shi;
    int world;
    ckpt_mp *mp;
    grit_err rc = ckpt__mp_open(s, dir, &mp);
    if (rc != GRIT_OK || mp) { /* model-parallel shards: the tensors overlapping the range */
        rc = rc == GRIT_OK ? mp_moments_range(s, dir, mp, m, lo, hi, mm, vv) : rc;
        ckpt__mp_free(mp);
        return rc;
    }
    if ((rc = shard_table(s, dir, m, &slo, &shi, &world)) != GRIT_OK)
        return rc;
    if (world > 0) { /* reslice: read only the byte ranges this range needs */
        rc = read_range(s, dir, slo, shi, world, lo, hi, mm, vv);
    } else if (lo == 0 && hi == m->num_params) {
        rc = ckpt_load_moments(s, dir, m, mm, vv);
    } else { /* one optimizer.safetensors: read it whole, keep the range */
        float *fm = malloc(sizeof(float) * m->num_params), *fv = malloc(sizeof(float) * m->num_params);
        rc = !fm || !fv ? grit_errf(GRIT_ENOMEM, "out of memory")
                        : ckpt_load_moments(s, dir, m, fm, fv);
        if (rc == GRIT_OK) {
            memcpy(mm, fm + lo, (hi - lo) * sizeof(float));
            memcpy(vv, fv + lo, (hi - lo) * sizeof(float));
        }
        free(fm);
        free(fv);
    }
    free(slo);
    free(shi);
    return rc;
}

/* Model weights from dir/model.safetensors, or from the shards a Hugging Face
 * model.safetensors.index.json names ({"weight_map": {tensor: file}}): each
 * shard is read straight into the parameter block (no second copy of the
 * model), every tensor must come from the shard the index names, and every
 * model tensor must be somewhere. */
static grit_err load_weights(store *s, const char *dir, const gx_model *m,
                             const char *const *pp, float **pb, const sink *sk)
{
    char path[512], what[1600];
    size_t sz;
    ckpt_mp *mp;
    grit_err mrc = ckpt__mp_open(s, dir, &mp);
    if (mrc != GRIT_OK)
        return mrc;
    if (mp) { /* model-parallel shards: each tensor assembled from its slices */
        for (int i = 0; mrc == GRIT_OK && i < m->num_tensors; i++) {
            float *dst = sk ? sk->tmp : pb[0] + m->tensors[i].offset;
            mrc = ckpt__mp_read(s, dir, mp, &m->tensors[i], pp[0], dst);
            if (mrc == GRIT_OK && sk)
                mrc = sk->fn(sk->ctx, sk->first_block, i, dst);
        }
        ckpt__mp_free(mp);
        return mrc;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (s->ops->size(s, path, &sz) == GRIT_OK)
        return load_file(s, dir, "model.safetensors", m, pp, pb, 1, NULL, sk);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (s->ops->size(s, path, &sz) != GRIT_OK)
        return grit_errf(GRIT_ENOTFOUND, "%s/%s: neither model.safetensors nor "
                         "model.safetensors.index.json", s->root, dir);
    snprintf(what, sizeof what, "%s/%s", s->root, path);
    char *text = NULL;
    grit_err rc = store_read_all(s, path, &text, NULL);
    if (rc != GRIT_OK)
        return rc;
    json_error_t je;
    json_t *j = json_loads(text, 0, &je), *wm = json_object_get(j, "weight_map");
    free(text);
    unsigned char *loaded = calloc((size_t)m->num_tensors, 1);
    const char **files = calloc((size_t)m->num_tensors + 1, sizeof *files);
    int nfiles = 0;
    if (!loaded || !files) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    if (!j) {
        rc = grit_errf(GRIT_EFORMAT, "%s:%d:%d: invalid JSON: %s", what, je.line, je.column,
                       je.text);
        goto out;
    }
    if (!json_is_object(wm)) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'weight_map': expected an object", what);
        goto out;
    }
    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v)
    {
        const char *f = json_string_value(v);
        size_t fl = f ? strlen(f) : 0;
        if (!f || fl < 13 || fl > 160 || strchr(f, '/') || strcmp(f + fl - 12, ".safetensors") ||
            f[0] == '.') {
            rc = grit_errf(GRIT_EFORMAT, "%s: field 'weight_map.%s': expected a file name "
                                         "ending in .safetensors in the same folder (at most "
                                         "160 bytes)", what, name);
            goto out;
        }
        int seen = 0;
        for (int i = 0; i < nfiles && !seen; i++)
            seen = !strcmp(files[i], f);
        if (!seen) {
            if (nfiles == m->num_tensors) {
                rc = grit_errf(GRIT_EFORMAT, "%s: more shard files than model tensors", what);
                goto out;
            }
            files[nfiles++] = f;
        }
    }
    for (int i = 0; i < nfiles; i++)
        if ((rc = load_file(s, dir, files[i], m, pp, pb, 1, loaded, sk)) != GRIT_OK)
            goto out;
    for (int i = 0; i < m->num_tensors; i++) {
        const char *want = json_string_value(json_object_get(wm, m->tensors[i].name));
        if (!loaded[i]) {
            rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' is in no shard", what,
                           m->tensors[i].name);
            goto out;
        }
        if (!want) {
            rc = grit_errf(GRIT_EFORMAT, "%s: field 'weight_map': tensor '%s' is missing (found "
                                         "in a shard)", what, m->tensors[i].name);
            goto out;
        }
    }
    /* a tensor in a shard other than the one the index names */
    for (int i = 0; i < nfiles; i++) {
        char sp[600];
        snprintf(sp, sizeof sp, "%s/%s", dir, files[i]);
        st_file f = {0};
        if ((rc = ckpt__open_st(s, sp, what, &f)) != GRIT_OK)
            goto out;
        for (int k = 0; k < f.n && rc == GRIT_OK; k++) {
            const char *want = json_string_value(json_object_get(wm, f.t[k].name));
            if (gx_find(m, f.t[k].name) && (!want || strcmp(want, files[i])))
                rc = grit_errf(GRIT_EFORMAT, "%s: tensor '%s' is in %s, the index says %s", what,
                               f.t[k].name, files[i], want ? want : "nothing");
        }
        st_file_free(&f);
        if (rc != GRIT_OK)
            goto out;
    }
out:
    free(loaded);
    free(files);
    json_decref(j);
    return rc;
}

grit_err ckpt_load(store *s, const char *dir, gx_model *m, ckpt_state *st, bool weights_only)
{
    const char *pp[1] = {""};
    float *pb[1] = {m->params};
    grit_err rc = load_weights(s, dir, m, pp, pb, NULL);
    if (rc != GRIT_OK || weights_only)
        return rc;
    if ((rc = ckpt_read_state(s, dir, st)) != GRIT_OK)
        return rc;
    return ckpt_load_moments_range(s, dir, m, 0, m->num_params, m->adam_m, m->adam_v);
}

grit_err ckpt_load_each(store *s, const char *dir, const gx_model *m, int moments,
                        ckpt_tensor_fn fn, void *ctx)
{
    size_t big = gx_max_numel(m);
    float *tmp = malloc(sizeof(float) * big * 2);
    if (!tmp)
        return grit_errf(GRIT_ENOMEM, "out of memory for a %zu-element tensor", big);
    const char *pp[1] = {""};
    float *pb[1] = {NULL};
    sink sk = {.fn = fn, .ctx = ctx, .tmp = tmp, .first_block = 0};
    grit_err rc = load_weights(s, dir, m, pp, pb, &sk);
    long *slo = NULL, *shi = NULL;
    int world = 0;
    ckpt_mp *mp = NULL;
    if (rc == GRIT_OK && moments)
        rc = ckpt__mp_open(s, dir, &mp);
    if (rc == GRIT_OK && moments && !mp)
        rc = shard_table(s, dir, m, &slo, &shi, &world);
    if (rc == GRIT_OK && mp) { /* model-parallel shards: whole tensors from their slices */
        for (int i = 0; rc == GRIT_OK && i < m->num_tensors; i++) {
            const gx_tensor *t = &m->tensors[i];
            if ((rc = ckpt__mp_read(s, dir, mp, t, "exp_avg.", tmp)) == GRIT_OK &&
                (rc = ckpt__mp_read(s, dir, mp, t, "exp_avg_sq.", tmp + big)) == GRIT_OK &&
                (rc = fn(ctx, 1, i, tmp)) == GRIT_OK)
                rc = fn(ctx, 2, i, tmp + big);
        }
    } else if (rc == GRIT_OK && moments && world > 0) { /* per tensor, the byte ranges it needs */
        for (int i = 0; rc == GRIT_OK && i < m->num_tensors; i++) {
            const gx_tensor *t = &m->tensors[i];
            rc = read_range(s, dir, slo, shi, world, t->offset, t->offset + t->numel, tmp,
                            tmp + big);
            if (rc == GRIT_OK)
                rc = fn(ctx, 1, i, tmp);
            if (rc == GRIT_OK)
                rc = fn(ctx, 2, i, tmp + big);
        }
    } else if (rc == GRIT_OK && moments) {
        const char *op[2] = {"exp_avg.", "exp_avg_sq."};
        float *ob[2] = {NULL, NULL};
        sk.first_block = 1;
        rc = load_file(s, dir, "optimizer.safetensors", m, op, ob, 2, NULL, &sk);
    }
    ckpt__mp_free(mp);
    free(slo);
    free(shi);
    free(tmp);
    return rc;
}

grit_err ckpt_weights_fit(store *s, const char *dir, const gx_config *cfg)
{
    char path[512], what[1600], *text = NULL;
    size_t have = 0, sz;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(what, sizeof what, "%s/%s", s->root, path);
    if (s->ops->size(s, path, &have) != GRIT_OK) { /* the shards an index names */
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        snprintf(what, sizeof what, "%s/%s", s->root, path);
        if (store_read_all(s, path, &text, NULL) != GRIT_OK)
            return GRIT_OK; /* nothing to judge: the load says what is missing */
        json_t *j = json_loads(text, 0, NULL), *wm = json_object_get(j, "weight_map");
        free(text);
        json_t *seen = json_object(), *v;
        const char *name;
        json_object_foreach(wm, name, v)
        {
            const char *f = json_string_value(v);
            char sp[600];
            if (!f || json_object_get(seen, f) || strlen(f) > 160)
                continue;
            json_object_set_new(seen, f, json_true());
            snprintf(sp, sizeof sp, "%s/%s", dir, f);
            if (s->ops->size(s, sp, &sz) == GRIT_OK)
                have += sz;
        }
        json_decref(seen);
        json_decref(j);
    }
    size_t n = gx_param_count(cfg);
    /* 2 bytes per parameter at the least (F16/BF16); judged when the model takes 1 GiB or
     * more in F32: a smaller one is allocated and the load's own checks name the defect */
    if (have / 2 < n && n >= (1u << 28))
        return grit_errf(GRIT_EFORMAT, "%s: %zu bytes of weights, but its config.json describes "
                                       "%zu parameters (at least %zu bytes in BF16): a config "
                                       "that does not belong to these weights",
                         what, have, n, 2 * n);
    return GRIT_OK;
}
