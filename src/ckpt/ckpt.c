/*
 * ckpt.c - checkpoint save (commit protocol), verify, find, list, prune (loading is
 * ckpt_load.c). See ckpt.h for the layout and the protocol; docs/formats.md for the bytes.
 */
#include "ckpt/ckpt.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ckpt/ckpt_internal.h"
#include "core/runlock.h"
#include "ckpt/hf_family.h"
#include "ckpt/safetensors.h"

#define NFILES 5
/* optimizer.safetensors, or a complete set of optim-rank*-of-N shards (checked apart) */
static const char *const required[] = {"config.json", "trainer_state.json", NULL};

void ckpt_dirname(char *buf, size_t cap, long step) { snprintf(buf, cap, "step_%08ld", step); }

typedef ckpt_file mf_entry;

static void hash_bytes(void *ctx, const void *p, size_t n) { XXH3_64bits_update(ctx, p, n); }

/* put() with the file's size and xxh3-64 computed over the bytes as they go out. */
static grit_err put_hashed(store *s, const char *dir, const char *name, const void *const *bufs,
                           const size_t *lens, int n, mf_entry *e)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    store_sink sink = {hash_bytes, &st};
    snprintf(e->name, sizeof e->name, "%s", name);
    e->lo = e->hi = -1;
    e->size = 0;
    for (int i = 0; i < n; i++)
        e->size += lens[i];
    grit_err rc = s->ops->put(s, path, bufs, lens, n, &sink);
    e->hash = XXH3_64bits_digest(&st);
    return rc;
}

/* Safetensors of one block (params, m or v) with names prefix + HF name; with
 * tp_rank >= 0 only the tensors that TP rank writes (ckpt__mp_keeps). */
static grit_err put_block(store *s, const char *dir, const char *file, const gx_model *m,
                          const float *const *blocks, const char *const *prefixes, int nblocks,
                          int tp_rank, mf_entry *e)
{
    int nt = m->num_tensors, cap = nt * nblocks, n = 0;
    st_entry *ent = calloc((size_t)cap, sizeof *ent);
    char (*names)[160] = calloc((size_t)cap, sizeof *names);
    const void **bufs = calloc((size_t)cap + 1, sizeof *bufs);
    size_t *lens = calloc((size_t)cap + 1, sizeof *lens);
    char *head = NULL;
    grit_err rc = GRIT_OK;
    if (!ent || !names || !bufs || !lens) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    for (int b = 0; b < nblocks; b++)
        for (int i = 0; i < nt; i++) {
            const gx_tensor *t = &m->tensors[i];
            if (tp_rank >= 0 && !ckpt__mp_keeps(t, tp_rank))
                continue;
            int k = n++;
            snprintf(names[k], sizeof names[k], "%s%s", prefixes[b], t->name);
            ent[k] = (st_entry){.name = names[k], .dtype = "F32", .ndim = t->ndim,
                                .shape = {t->shape[0], t->shape[1]},
                                .data = blocks[b] + t->offset};
            bufs[k + 1] = ent[k].data;
            lens[k + 1] = t->numel * sizeof(float);
        }
    if ((rc = st_header(ent, n, &head, &lens[0])) != GRIT_OK)
        goto out;
    bufs[0] = head;
    rc = put_hashed(s, dir, file, bufs, lens, n + 1, e);
out:
    free(head);
    free(ent);
    free(names);
    free(bufs);
    free(lens);
    return rc;
}

static grit_err put_text(store *s, const char *dir, const char *file, char *text, mf_entry *e)
{
    if (!text)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    size_t len = strlen(text);
    const void *b = text;
    grit_err rc = put_hashed(s, dir, file, &b, &len, 1, e);
    free(text);
    return rc;
}

static char *state_json(const ckpt_state *st)
{
    json_t *j = json_pack("{s:i,s:I,s:f,s:{s:I},s:f,s:s,s:{s:i,s:i}}", "format_version",
                          CKPT_FORMAT_VERSION, "step", (json_int_t)st->step, "tokens",
                          st->tokens, "data", "next_sample", (json_int_t)st->next_sample,
                          "loss", st->loss, "config_fingerprint", st->fingerprint, "world",
                          "size", st->world_size, "threads", st->threads);
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
                : NULL;
    json_decref(j);
    return s;
}

/* The manifest protects itself: self_xxh3 is the hash of its compact JSON form
 * without that member, so a damaged manifest is not mistaken for a good one. */
static grit_err manifest_self_hash(json_t *j, char out[17])
{
    json_t *c = json_copy(j);
    json_object_del(c, "self_xxh3");
    char *t = c ? json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(c);
    if (!t)
        return GRIT_ENOMEM;
    snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits(t, strlen(t)));
    free(t);
    return GRIT_OK;
}

static char *manifest_json(long step, const mf_entry *e, int n, const gx_config *cfg)
{
    json_t *files = json_array();
    for (int i = 0; i < n; i++) {
        int t, T, p, P;
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)e[i].hash);
        json_t *f = json_pack("{s:s,s:I,s:s}", "name", e[i].name, "size",
                              (json_int_t)e[i].size, "xxh3", hex);
        if (f && e[i].lo >= 0) { /* an optimiser shard: its element range of the flat block */
            json_object_set_new(f, "lo", json_integer((json_int_t)e[i].lo));
            json_object_set_new(f, "hi", json_integer((json_int_t)e[i].hi));
        }
        /* a model-parallel shard: which slice of which Hugging Face tensor it holds */
        if (f && ckpt__mp_parse(e[i].name, &t, &T, &p, &P)) {
            json_t *sl = cfg ? ckpt__mp_slices(cfg, t, T, p, P) : NULL;
            if (!sl) {
                json_decref(f);
                json_decref(files);
                return NULL;
            }
            json_object_set_new(f, "tensors", sl);
        }
        json_array_append_new(files, f);
    }
    json_t *j = json_pack("{s:s,s:i,s:I,s:o}", "format", "grit-checkpoint", "version",
                          CKPT_FORMAT_VERSION, "step", (json_int_t)step, "files", files);
    char self[17];
    if (!j || manifest_self_hash(j, self) != GRIT_OK) {
        json_decref(j);
        return NULL;
    }
    json_object_set_new(j, "self_xxh3", json_string(self));
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return s;
}

/* Where a step's files are written before the commit. Without rename (S3) they go to
 * their final names and the manifest, written last, is what commits; ckpt_begin then
 * removes an older copy of the step first. */
static void tmp_name(const store *s, char *buf, size_t cap, long step)
{
    char dir[64];
    ckpt_dirname(dir, sizeof dir, step);
    snprintf(buf, cap, s->no_rename ? "%s" : "%s.tmp", dir);
}

grit_err ckpt_begin(store *s, long step)
{
    char tmp[80];
    tmp_name(s, tmp, sizeof tmp, step);
    grit_err rc = s->ops->remove(s, tmp);
    return rc == GRIT_OK ? s->ops->mkdir(s, tmp) : rc;
}

void ckpt_abandon(store *s, long step)
{
    char tmp[80];
    tmp_name(s, tmp, sizeof tmp, step);
    s->ops->remove(s, tmp);
}

grit_err ckpt_put_model(store *s, const gx_model *m, const float *params, const ckpt_state *st,
                        ckpt_file out[3])
{
    char tmp[80];
    tmp_name(s, tmp, sizeof tmp, st->step);
    const float *pb[1] = {params};
    const char *pp[1] = {""};
    grit_err rc;
    char *cj = hf_family_config_json(&m->cfg);
    if (!cj)
        return grit_errf(GRIT_EINVAL, "config.json: %s", grit_errmsg());
    if ((rc = put_block(s, tmp, "model.safetensors", m, pb, pp, 1, -1, &out[0])) != GRIT_OK) {
        free(cj);
        return rc;
    }
    if ((rc = put_text(s, tmp, "config.json", cj, &out[1])) != GRIT_OK ||
        (rc = put_text(s, tmp, "trainer_state.json", state_json(st), &out[2])) != GRIT_OK)
        return rc;
    return GRIT_OK;
}

grit_err ckpt_put_meta(store *s, const gx_config *cfg, const ckpt_state *st, ckpt_file out[2])
{
    char tmp[80];
    tmp_name(s, tmp, sizeof tmp, st->step);
    char *cj = hf_family_config_json(cfg);
    if (!cj)
        return grit_errf(GRIT_EINVAL, "config.json: %s", grit_errmsg());
    grit_err rc = put_text(s, tmp, "config.json", cj, &out[0]);
    return rc == GRIT_OK ? put_text(s, tmp, "trainer_state.json", state_json(st), &out[1]) : rc;
}

grit_err ckpt_put_mp(store *s, long step, const gx_model *m, const float *params,
                     const float *mm, const float *vv, ckpt_file *out)
{
    char tmp[80], name[96];
    tmp_name(s, tmp, sizeof tmp, step);
    ckpt_mp_name(name, sizeof name, m->tp_rank, m->tp, m->pp_rank, m->pp);
    const float *b[3] = {params, mm, vv};
    const char *pre[3] = {"", "exp_avg.", "exp_avg_sq."};
    grit_err rc = put_block(s, tmp, name, m, b, pre, 3, m->tp_rank, out);
    if (rc == GRIT_OK)
        store_phase(s, "shard");
    return rc;
}

void ckpt_shard_name(char *buf, size_t cap, int rank, int world)
{
    snprintf(buf, cap, "optim-rank%d-of-%d.safetensors", rank, world);
}

grit_err ckpt_put_shard(store *s, long step, int rank, int world, size_t lo, size_t hi,
                        const float *mm, const float *vv, ckpt_file *out)
{
    char tmp[80], name[64];
    tmp_name(s, tmp, sizeof tmp, step);
    ckpt_shard_name(name, sizeof name, rank, world);
    long n = (long)(hi - lo);
    st_entry ent[2] = {{.name = "exp_avg", .dtype = "F32", .ndim = 1, .shape = {n}, .data = mm},
                       {.name = "exp_avg_sq", .dtype = "F32", .ndim = 1, .shape = {n}, .data = vv}};
    char *head = NULL;
    size_t lens[3];
    grit_err rc = st_header(ent, 2, &head, &lens[0]);
    if (rc != GRIT_OK)
        return rc;
    const void *bufs[3] = {head, mm, vv};
    lens[1] = lens[2] = (size_t)n * sizeof(float);
    rc = put_hashed(s, tmp, name, bufs, lens, 3, out);
    free(head);
    out->lo = (long)lo;
    out->hi = (long)hi;
    if (rc == GRIT_OK)
        store_phase(s, "shard");
    return rc;
}

grit_err ckpt_commit(store *s, long step, const ckpt_file *files, int n, const gx_config *cfg,
                     double *bytes)
{
    char dir[64], tmp[80];
    ckpt_dirname(dir, sizeof dir, step);
    tmp_name(s, tmp, sizeof tmp, step);
    mf_entry me;
    grit_err rc;
    /* a rank that outlived its supervisor (or whose run another one now owns) never
     * commits: the manifest and the rename below are what make a step visible */
    char why[400];
    runlock_state owner = runlock_env_owner(0, why, sizeof why);
    if (owner == RUNLOCK_GONE || owner == RUNLOCK_SUPERSEDED) {
        rc = grit_errf(GRIT_EIO, "%s: step %ld not committed: %s", s->root, step, why);
        goto fail;
    }
    store_phase(s, "files");
    if ((rc = put_text(s, tmp, "manifest.json", manifest_json(step, files, n, cfg), &me)) != GRIT_OK)
        goto fail;
    store_phase(s, "manifest");
    /* a complete older copy of this step (a re-save after resume) is replaced */
    if (!s->no_rename &&
        ((rc = s->ops->remove(s, dir)) != GRIT_OK || (rc = s->ops->rename(s, tmp, dir)) != GRIT_OK ||
         (rc = s->ops->sync_dir(s, ".")) != GRIT_OK))
        goto fail;
    store_phase(s, "rename");
    char latest[80];
    snprintf(latest, sizeof latest, "%s\n", dir);
    if ((rc = store_write_atomic(s, "LATEST", latest, strlen(latest))) != GRIT_OK)
        return rc; /* step_N is complete and verifiable; only the hint failed */
    store_phase(s, "latest");
    if (bytes) {
        *bytes = (double)me.size;
        for (int i = 0; i < n; i++)
            *bytes += (double)files[i].size;
    }
    return GRIT_OK;
fail:
    s->ops->remove(s, tmp);
    return rc;
}

grit_err ckpt_save(store *s, const gx_model *m, const float *params, const float *adam_m,
                   const float *adam_v, const ckpt_state *st, double *bytes)
{
    char tmp[80];
    mf_entry e[NFILES];
    tmp_name(s, tmp, sizeof tmp, st->step);
    grit_err rc = ckpt_begin(s, st->step);
    if (rc != GRIT_OK)
        return rc;
    const float *pb[1] = {params}, *ob[2] = {adam_m, adam_v};
    const char *pp[1] = {""}, *op[2] = {"exp_avg.", "exp_avg_sq."};
    if ((rc = put_block(s, tmp, "model.safetensors", m, pb, pp, 1, -1, &e[0])) != GRIT_OK ||
        (rc = put_block(s, tmp, "optimizer.safetensors", m, ob, op, 2, -1, &e[1])) != GRIT_OK ||
        (rc = put_text(s, tmp, "config.json", hf_family_config_json(&m->cfg), &e[2])) != GRIT_OK ||
        (rc = put_text(s, tmp, "trainer_state.json", state_json(st), &e[3])) != GRIT_OK) {
        s->ops->remove(s, tmp);
        return rc;
    }
    return ckpt_commit(s, st->step, e, 4, &m->cfg, bytes);
}

/* --- verify --------------------------------------------------------------------- */

static grit_err hash_file(store *s, const char *path, size_t size, uint64_t *out)
{
    enum { CHUNK = 8 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    grit_err rc = GRIT_OK;
    for (size_t off = 0; off < size && rc == GRIT_OK; off += CHUNK) {
        size_t n = size - off < CHUNK ? size - off : CHUNK;
        rc = s->ops->read(s, path, off, n, buf);
        if (rc == GRIT_OK)
            XXH3_64bits_update(&st, buf, n);
    }
    free(buf);
    *out = XXH3_64bits_digest(&st);
    return rc;
}

/* Parses "optim-rankR-of-N.safetensors"; 0 if name is not a shard. */
static int shard_of(const char *name, int *rank, int *world)
{
    int len = 0;
    return sscanf(name, "optim-rank%d-of-%d.safetensors%n", rank, world, &len) == 2 &&
           name[len] == '\0' && *world > 0 && *rank >= 0 && *rank < *world;
}

/* The shard entries of a manifest's files, by rank: lo/hi of each; *world 0 when
 * there are none. Checks that ranks 0..N-1 appear once each and their element
 * ranges tile [0, hi of the last) in rank order. */
grit_err ckpt__shard_table(json_t *files, long **lo, long **hi, int *world, char *why,
                           size_t cap)
{
    *lo = *hi = NULL;
    *world = 0;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i), *nm = json_object_get(f, "name");
        int r, w;
        if (!json_is_string(nm) || !shard_of(json_string_value(nm), &r, &w))
            continue;
        json_t *jl = json_object_get(f, "lo"), *jh = json_object_get(f, "hi");
        if (!*lo) {
            if (w > 1 << 20 || !(*lo = malloc(sizeof(long) * (size_t)w)) ||
                !(*hi = malloc(sizeof(long) * (size_t)w))) {
                snprintf(why, cap, "manifest.json: %s: cannot hold %d shards", json_string_value(nm), w);
                return GRIT_EFORMAT;
            }
            for (int k = 0; k < w; k++)
                (*lo)[k] = -1;
            *world = w;
        }
        if (w != *world || !json_is_integer(jl) || !json_is_integer(jh) ||
            json_integer_value(jl) < 0 || json_integer_value(jh) < json_integer_value(jl) ||
            (*lo)[r] >= 0) {
            snprintf(why, cap, "manifest.json: %s: expected one shard per rank of %d, each with "
                               "an element range lo <= hi", json_string_value(nm), *world);
            return GRIT_EFORMAT;
        }
        (*lo)[r] = (long)json_integer_value(jl);
        (*hi)[r] = (long)json_integer_value(jh);
    }
    for (int r = 0; r < *world; r++)
        if ((*lo)[r] != (r ? (*hi)[r - 1] : 0)) {
            snprintf(why, cap, "manifest.json: optimiser shards of %d ranks: rank %d %s", *world,
                     r, (*lo)[r] < 0 ? "is missing" : "does not start where the previous ends");
            return GRIT_EFORMAT;
        }
    return GRIT_OK;
}

static int lists(json_t *files, const char *name)
{
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *nm = json_object_get(json_array_get(files, i), "name");
        if (json_is_string(nm) && !strcmp(json_string_value(nm), name))
            return 1;
    }
    return 0;
}

/* The weights and optimiser state are listed: model.safetensors and optimizer.safetensors
 * or a complete optimiser shard set, or a complete set of model-parallel shards (weights
 * and moments). */
static grit_err check_optim(json_t *files, char *why, size_t cap)
{
    long *lo, *hi;
    int world, mp;
    grit_err rc = ckpt__mp_check(files, &mp, why, cap);
    if (rc != GRIT_OK || mp)
        return rc;
    if (!lists(files, "model.safetensors")) {
        snprintf(why, cap, "manifest.json: does not list model.safetensors (or model-parallel "
                           "shards)");
        return GRIT_EFORMAT;
    }
    rc = ckpt__shard_table(files, &lo, &hi, &world, why, cap);
    free(lo);
    free(hi);
    if (rc != GRIT_OK || world > 0)
        return rc;
    if (lists(files, "optimizer.safetensors"))
        return GRIT_OK;
    snprintf(why, cap, "manifest.json: does not list optimizer.safetensors or optimiser shards");
    return GRIT_EFORMAT;
}

grit_err ckpt_verify(store *s, const char *dir, char *why, size_t cap)
{
    char path[256], *text = NULL;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    grit_err rc = store_read_all(s, path, &text, NULL);
    if (rc != GRIT_OK) {
        snprintf(why, cap, "manifest.json: %s", rc == GRIT_ENOTFOUND ? "missing" : grit_errmsg());
        return GRIT_EFORMAT;
    }
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    free(text);
    json_t *files = json_object_get(j, "files"), *ver = json_object_get(j, "version");
    rc = GRIT_EFORMAT;
    if (!j || !json_is_array(files) || !json_is_integer(ver)) {
        snprintf(why, cap, "manifest.json: not a grit manifest (%s)", j ? "fields" : je.text);
        goto out;
    }
    char self[17];
    json_t *sh = json_object_get(j, "self_xxh3");
    if (!json_is_string(sh) || manifest_self_hash(j, self) != GRIT_OK ||
        strcmp(self, json_string_value(sh)) != 0) {
        snprintf(why, cap, "manifest.json: self-check failed (self_xxh3 %s, content hashes to "
                           "%s): the manifest is damaged",
                 json_is_string(sh) ? json_string_value(sh) : "missing", self);
        goto out;
    }
    if (json_integer_value(ver) != CKPT_FORMAT_VERSION) {
        snprintf(why, cap, "manifest.json: version %lld, this grit reads version %d (use a grit "
                           "that wrote it, or export/import through Hugging Face format)",
                 (long long)json_integer_value(ver), CKPT_FORMAT_VERSION);
        goto out;
    }
    for (const char *const *r = required; *r; r++) {
        if (!lists(files, *r)) {
            snprintf(why, cap, "manifest.json: does not list %s", *r);
            goto out;
        }
    }
    if (check_optim(files, why, cap) != GRIT_OK)
        goto out;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        json_t *nm = json_object_get(f, "name"), *sz = json_object_get(f, "size"),
               *hx = json_object_get(f, "xxh3");
        if (!json_is_string(nm) || !json_is_integer(sz) || !json_is_string(hx) ||
            strchr(json_string_value(nm), '/')) {
            snprintf(why, cap, "manifest.json: files[%zu]: expected {name, size, xxh3}", i);
            goto out;
        }
        const char *name = json_string_value(nm);
        size_t have;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        grit_err r2 = s->ops->size(s, path, &have);
        if (r2 != GRIT_OK) {
            snprintf(why, cap, "%s: missing", name);
            goto out;
        }
        if (have != (size_t)json_integer_value(sz)) {
            snprintf(why, cap, "%s: size %zu, manifest says %lld (truncated or extended)", name,
                     have, (long long)json_integer_value(sz));
            goto out;
        }
        uint64_t h = 0;
        if ((r2 = hash_file(s, path, have, &h)) != GRIT_OK) {
            snprintf(why, cap, "%s: unreadable: %s", name, grit_errmsg());
            goto out;
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        if (strcmp(hex, json_string_value(hx)) != 0) {
            snprintf(why, cap, "%s: xxh3 %s, manifest says %s (corrupt)", name, hex,
                     json_string_value(hx));
            goto out;
        }
    }
    rc = GRIT_OK;
out:
    json_decref(j);
    return rc;
}

/* --- list / find / prune ---------------------------------------------------------- */

typedef struct steps_acc {
    long *v;
    int n, cap, tmp_n;
    char tmp[64][32]; /* stale *.tmp entries (first 64) */
} steps_acc;

static void collect(void *ctx, const char *name)
{
    steps_acc *a = ctx;
    long step;
    int len = 0;
    if (sscanf(name, "step_%8ld%n", &step, &len) == 1 && len == 13 && name[13] == '\0') {
        if (a->n == a->cap) {
            int nc = a->cap ? a->cap * 2 : 16;
            long *nv = realloc(a->v, sizeof(long) * (size_t)nc);
            if (!nv)
                return;
            a->v = nv;
            a->cap = nc;
        }
        a->v[a->n++] = step;
    } else if (strlen(name) > 4 && !strcmp(name + strlen(name) - 4, ".tmp") && a->tmp_n < 64 &&
               strlen(name) < 32) {
        snprintf(a->tmp[a->tmp_n++], 32, "%s", name);
    }
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static grit_err scan(store *s, steps_acc *a)
{
    memset(a, 0, sizeof *a);
    grit_err rc = s->ops->list(s, ".", collect, a);
    if (rc == GRIT_OK && a->n)
        qsort(a->v, (size_t)a->n, sizeof(long), cmp_long);
    return rc;
}

/* no_rename stores: does step dir d have its manifest (was it committed)? */
static int has_manifest(store *s, const char *d)
{
    char p[96];
    size_t n;
    snprintf(p, sizeof p, "%s/manifest.json", d);
    return s->ops->size(s, p, &n) != GRIT_ENOTFOUND;
}

grit_err ckpt_list(store *s, long **steps, int *n)
{
    steps_acc a;
    grit_err rc = scan(s, &a);
    *steps = a.v;
    *n = a.n;
    return rc;
}

grit_err ckpt_find(store *s, char *dir, size_t cap, ckpt_reject_fn reject, void *ctx)
{
    steps_acc a;
    grit_err rc = scan(s, &a);
    if (rc != GRIT_OK) {
        free(a.v);
        return rc;
    }
    if (a.n == 0) {
        free(a.v);
        return grit_errf(GRIT_ENOTFOUND, "%s: no checkpoint", s->root);
    }
    int unfinished = 0;
    for (int i = a.n - 1; i >= 0; i--) {
        char d[64], why[512];
        ckpt_dirname(d, sizeof d, a.v[i]);
        if (s->no_rename && !has_manifest(s, d)) {
            unfinished++; /* a write that never committed: like a .tmp, not a candidate */
            continue;
        }
        int ok = ckpt_verify(s, d, why, sizeof why) == GRIT_OK;
        /* a two-tier store: the local copy failed, try the remote one */
        while (!ok && s->ops->fallback && s->ops->fallback(s, d) == GRIT_OK) {
            if (reject)
                reject(ctx, d, why, 1);
            ok = ckpt_verify(s, d, why, sizeof why) == GRIT_OK;
        }
        if (ok) {
            snprintf(dir, cap, "%s", d);
            free(a.v);
            return GRIT_OK;
        }
        if (reject)
            reject(ctx, d, why, 0);
    }
    int n = a.n - unfinished;
    free(a.v);
    if (n == 0)
        return grit_errf(GRIT_ENOTFOUND, "%s: no committed checkpoint", s->root);
    return grit_errf(GRIT_EFORMAT, "%s: none of the %d checkpoints verifies", s->root, n);
}

grit_err ckpt_prune(store *s, int keep_last, long keep_every, long keep_step, int *removed)
{
    steps_acc a;
    grit_err rc = scan(s, &a);
    *removed = 0;
    /* no_rename stores: steps without a manifest are unfinished writes (the .tmp of
     * this store): removed, and not counted as kept checkpoints */
    for (int i = 0, k = 0; rc == GRIT_OK && s->no_rename && i < a.n; i++) {
        char d[64];
        ckpt_dirname(d, sizeof d, a.v[i]);
        if (a.v[i] == keep_step || has_manifest(s, d))
            a.v[k++] = a.v[i];
        else
            rc = s->ops->remove(s, d);
        if (i == a.n - 1)
            a.n = k;
    }
    for (int i = 0; rc == GRIT_OK && i < a.n; i++) {
        long st = a.v[i];
        int keep = i >= a.n - keep_last || st == keep_step || (keep_every > 0 && st % keep_every == 0);
        if (keep)
            continue;
        char d[64];
        ckpt_dirname(d, sizeof d, st);
        if ((rc = s->ops->remove(s, d)) == GRIT_OK)
            (*removed)++;
    }
    for (int i = 0; rc == GRIT_OK && i < a.tmp_n; i++)
        rc = s->ops->remove(s, a.tmp[i]);
    free(a.v);
    return rc;
}
