/*
 * ckpt.c - checkpoint save (commit protocol), verify, find, load, list, prune.
 * See ckpt.h for the layout and the protocol; docs/formats.md for the bytes.
 */
#include "ckpt/ckpt.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ckpt/hf_family.h"
#include "ckpt/safetensors.h"

#define NFILES 5
/* optimizer.safetensors, or a complete set of optim-rank*-of-N shards (checked apart) */
static const char *const required[] = {"model.safetensors", "config.json", "trainer_state.json",
                                       NULL};

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

/* Safetensors of one block (params, m or v) with names prefix + HF name. */
static grit_err put_block(store *s, const char *dir, const char *file, const gx_model *m,
                          const float *const *blocks, const char *const *prefixes, int nblocks,
                          mf_entry *e)
{
    int nt = m->num_tensors, n = nt * nblocks;
    st_entry *ent = calloc((size_t)n, sizeof *ent);
    char (*names)[160] = calloc((size_t)n, sizeof *names);
    const void **bufs = calloc((size_t)n + 1, sizeof *bufs);
    size_t *lens = calloc((size_t)n + 1, sizeof *lens);
    char *head = NULL;
    grit_err rc = GRIT_OK;
    if (!ent || !names || !bufs || !lens) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    for (int b = 0; b < nblocks; b++)
        for (int i = 0; i < nt; i++) {
            const gx_tensor *t = &m->tensors[i];
            int k = b * nt + i;
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

static char *manifest_json(long step, const mf_entry *e, int n)
{
    json_t *files = json_array();
    for (int i = 0; i < n; i++) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)e[i].hash);
        json_t *f = json_pack("{s:s,s:I,s:s}", "name", e[i].name, "size",
                              (json_int_t)e[i].size, "xxh3", hex);
        if (f && e[i].lo >= 0) { /* an optimiser shard: its element range of the flat block */
            json_object_set_new(f, "lo", json_integer((json_int_t)e[i].lo));
            json_object_set_new(f, "hi", json_integer((json_int_t)e[i].hi));
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
    if ((rc = put_block(s, tmp, "model.safetensors", m, pb, pp, 1, &out[0])) != GRIT_OK) {
        free(cj);
        return rc;
    }
    if ((rc = put_text(s, tmp, "config.json", cj, &out[1])) != GRIT_OK ||
        (rc = put_text(s, tmp, "trainer_state.json", state_json(st), &out[2])) != GRIT_OK)
        return rc;
    return GRIT_OK;
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

grit_err ckpt_commit(store *s, long step, const ckpt_file *files, int n, double *bytes)
{
    char dir[64], tmp[80];
    ckpt_dirname(dir, sizeof dir, step);
    tmp_name(s, tmp, sizeof tmp, step);
    mf_entry me;
    grit_err rc;
    store_phase(s, "files");
    if ((rc = put_text(s, tmp, "manifest.json", manifest_json(step, files, n), &me)) != GRIT_OK)
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
    if ((rc = put_block(s, tmp, "model.safetensors", m, pb, pp, 1, &e[0])) != GRIT_OK ||
        (rc = put_block(s, tmp, "optimizer.safetensors", m, ob, op, 2, &e[1])) != GRIT_OK ||
        (rc = put_text(s, tmp, "config.json", hf_family_config_json(&m->cfg), &e[2])) != GRIT_OK ||
        (rc = put_text(s, tmp, "trainer_state.json", state_json(st), &e[3])) != GRIT_OK) {
        s->ops->remove(s, tmp);
        return rc;
    }
    return ckpt_commit(s, st->step, e, 4, bytes);
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
static grit_err shard_table(json_t *files, long **lo, long **hi, int *world, char *why,
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

/* The optimiser state is listed: optimizer.safetensors or a complete shard set. */
static grit_err check_optim(json_t *files, char *why, size_t cap)
{
    long *lo, *hi;
    int world;
    grit_err rc = shard_table(files, &lo, &hi, &world, why, cap);
    free(lo);
    free(hi);
    if (rc != GRIT_OK || world > 0)
        return rc;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *nm = json_object_get(json_array_get(files, i), "name");
        if (json_is_string(nm) && !strcmp(json_string_value(nm), "optimizer.safetensors"))
            return GRIT_OK;
    }
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
        int found = 0;
        for (size_t i = 0; i < json_array_size(files); i++) {
            json_t *nm = json_object_get(json_array_get(files, i), "name");
            found |= json_is_string(nm) && !strcmp(json_string_value(nm), *r);
        }
        if (!found) {
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
static grit_err load_file(store *s, const char *dir, const char *file, const gx_model *m,
                          const char *const *prefixes, float **blocks, int nblocks,
                          unsigned char *loaded)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
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
            float *dst = blocks[b] + t->offset;
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
    return load_file(s, dir, "optimizer.safetensors", m, op, ob, 2, NULL);
}

/* Reads and parses the safetensors header of path. */
static grit_err open_st(store *s, const char *path, const char *what, st_file *f)
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
    grit_err rc = open_st(s, path, what, &f);
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

grit_err ckpt_load_moments_range(store *s, const char *dir, const gx_model *m, size_t lo,
                                 size_t hi, float *mm, float *vv)
{
    char path[256], *text = NULL, why[512];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    grit_err rc = store_read_all(s, path, &text, NULL);
    if (rc == GRIT_ENOTFOUND && lo == 0 && hi == m->num_params)
        return ckpt_load_moments(s, dir, m, mm, vv); /* a folder without a manifest */
    if (rc != GRIT_OK)
        return rc;
    json_t *j = json_loads(text, 0, NULL), *files = json_object_get(j, "files");
    free(text);
    long *slo = NULL, *shi = NULL;
    int world = 0;
    if (!json_is_array(files)) {
        rc = grit_errf(GRIT_EFORMAT, "%s/%s: not a grit manifest", s->root, path);
    } else if (shard_table(files, &slo, &shi, &world, why, sizeof why) != GRIT_OK) {
        rc = grit_errf(GRIT_EFORMAT, "%s/%s: %s", s->root, dir, why);
    } else if (world > 0 && shi[world - 1] != (long)m->num_params) {
        rc = grit_errf(GRIT_EFORMAT, "%s/%s: optimiser shards hold %ld elements, the model has %zu",
                       s->root, dir, shi[world - 1], m->num_params);
    } else if (world > 0) { /* reslice: read only the byte ranges this range needs */
        for (int r = 0; r < world && rc == GRIT_OK; r++) {
            size_t a = (size_t)slo[r] > lo ? (size_t)slo[r] : lo;
            size_t b = (size_t)shi[r] < hi ? (size_t)shi[r] : hi;
            char name[64];
            ckpt_shard_name(name, sizeof name, r, world);
            if (a < b)
                rc = read_shard(s, dir, name, slo[r], shi[r], a, b, mm + (a - lo), vv + (a - lo));
        }
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
    json_decref(j);
    return rc;
}

/* Model weights from dir/model.safetensors, or from the shards a Hugging Face
 * model.safetensors.index.json names ({"weight_map": {tensor: file}}): each
 * shard is read straight into the parameter block (no second copy of the
 * model), every tensor must come from the shard the index names, and every
 * model tensor must be somewhere. */
static grit_err load_weights(store *s, const char *dir, const gx_model *m,
                             const char *const *pp, float **pb)
{
    char path[512], what[1600];
    size_t sz;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (s->ops->size(s, path, &sz) == GRIT_OK)
        return load_file(s, dir, "model.safetensors", m, pp, pb, 1, NULL);
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
        if (!f || fl < 13 || strchr(f, '/') || strcmp(f + fl - 12, ".safetensors") ||
            f[0] == '.') {
            rc = grit_errf(GRIT_EFORMAT, "%s: field 'weight_map.%s': expected a file name "
                                         "ending in .safetensors in the same folder", what, name);
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
        if ((rc = load_file(s, dir, files[i], m, pp, pb, 1, loaded)) != GRIT_OK)
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
        if ((rc = open_st(s, sp, what, &f)) != GRIT_OK)
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
    grit_err rc = load_weights(s, dir, m, pp, pb);
    if (rc != GRIT_OK || weights_only)
        return rc;
    if ((rc = ckpt_read_state(s, dir, st)) != GRIT_OK)
        return rc;
    return ckpt_load_moments_range(s, dir, m, 0, m->num_params, m->adam_m, m->adam_v);
}
