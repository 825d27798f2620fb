/* plan.c - see plan.h. */
#include "prep/plan.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "prep/prep_s3.h"
#include "prep/reader.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static grit_err add_file(plan *p, const char *path, int fmt, uint64_t size, size_t *cap)
{
    if (p->n_files == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        plan_file *f = realloc(p->files, nc * sizeof *f);
        if (!f)
            return GRIT_ENOMEM;
        p->files = f;
        *cap = nc;
    }
    char *d = strdup(path);
    if (!d)
        return GRIT_ENOMEM;
    p->files[p->n_files++] = (plan_file){d, fmt == PREP_FMT_AUTO ? prep_format_of(path) : fmt,
                                         size};
    p->bytes += size;
    return GRIT_OK;
}

typedef struct s3_walk {
    plan *p;
    int fmt;
    size_t *cap;
} s3_walk;

static grit_err s3_add(void *ctx, const char *url, uint64_t size)
{
    s3_walk *w = ctx;
    /* under a prefix only document objects count, as in directories */
    if (w->fmt == PREP_FMT_AUTO && !prep_is_document_name(url))
        return GRIT_OK;
    return add_file(w->p, url, w->fmt, size, w->cap);
}

static grit_err walk(plan *p, const char *path, int fmt, size_t *cap, int depth)
{
    if (prep_s3_is_url(path)) {
        prep_s3 *s = NULL;
        s3_walk w = {p, fmt, cap};
        grit_err rc = prep_s3_open(&s);
        if (rc == GRIT_OK)
            rc = prep_s3_list(s, path, s3_add, &w);
        prep_s3_close(s);
        return rc;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return grit_errf(GRIT_ENOTFOUND, "%s: cannot read input: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        /* inside directories only document files count (not css, images) */
        if (depth > 0 && fmt == PREP_FMT_AUTO && !prep_is_document_name(path))
            return GRIT_OK;
        return add_file(p, path, fmt, (uint64_t)st.st_size, cap);
    }
    if (depth > 64)
        return grit_errf(GRIT_EINVAL, "%s: directories nested deeper than 64", path);
    DIR *d = opendir(path);
    if (!d)
        return grit_errf(GRIT_EIO, "%s: cannot open directory: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, ncap = 0;
    grit_err rc = GRIT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == ncap) {
            ncap = ncap ? ncap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn) {
                rc = GRIT_ENOMEM;
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = GRIT_ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == GRIT_OK)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && rc == GRIT_OK; i++) {
        size_t l = strlen(path) + strlen(names[i]) + 2;
        char *child = malloc(l);
        if (!child) {
            rc = GRIT_ENOMEM;
            break;
        }
        snprintf(child, l, "%s/%s", path, names[i]);
        rc = walk(p, child, fmt, cap, depth + 1);
        free(child);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static grit_err add_shard(plan *p, int src, size_t first, size_t count, size_t *cap)
{
    if (p->n_shards == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        plan_shard *s = realloc(p->shards, nc * sizeof *s);
        if (!s)
            return GRIT_ENOMEM;
        p->shards = s;
        *cap = nc;
    }
    p->shards[p->n_shards++] = (plan_shard){src, first, count};
    return GRIT_OK;
}

grit_err plan_build(plan *p, const prep_cfg *c)
{
    memset(p, 0, sizeof *p);
    size_t fcap = 0, scap = 0;
    grit_err rc = GRIT_OK;
    for (int s = 0; s < c->n_sources && rc == GRIT_OK; s++) {
        size_t start = p->n_files;
        for (int i = 0; i < c->sources[s].n_inputs && rc == GRIT_OK; i++)
            rc = walk(p, c->sources[s].inputs[i], c->sources[s].format, &fcap, 0);
        size_t group = 0, gstart = start;
        for (size_t f = start; f < p->n_files && rc == GRIT_OK; f++) {
            int fmt = p->files[f].format;
            if (fmt == PREP_FMT_WARC || fmt == PREP_FMT_JSONL) {
                if (group)
                    rc = add_shard(p, s, gstart, group, &scap);
                if (rc == GRIT_OK)
                    rc = add_shard(p, s, f, 1, &scap);
                group = 0;
                gstart = f + 1;
            } else {
                group++;
                if (group == (size_t)c->files_per_shard) {
                    rc = add_shard(p, s, gstart, group, &scap);
                    group = 0;
                    gstart = f + 1;
                }
            }
        }
        if (rc == GRIT_OK && group)
            rc = add_shard(p, s, gstart, group, &scap);
    }
    if (rc == GRIT_OK && p->n_shards == 0)
        rc = grit_errf(GRIT_EINVAL, "no input files found (give files or directories)");
    if (rc != GRIT_OK)
        plan_free(p);
    return rc;
}

uint64_t plan_fingerprint(const plan *p, const char *config_text)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, config_text, strlen(config_text));
    for (size_t i = 0; i < p->n_files; i++) {
        XXH3_64bits_update(&st, p->files[i].path, strlen(p->files[i].path) + 1);
        XXH3_64bits_update(&st, &p->files[i].format, sizeof p->files[i].format);
        XXH3_64bits_update(&st, &p->files[i].size, sizeof p->files[i].size);
    }
    for (size_t i = 0; i < p->n_shards; i++) {
        uint64_t v[3] = {(uint64_t)p->shards[i].source, p->shards[i].first,
                         p->shards[i].count};
        XXH3_64bits_update(&st, v, sizeof v);
    }
    return XXH3_64bits_digest(&st);
}

void plan_free(plan *p)
{
    for (size_t i = 0; i < p->n_files; i++)
        free(p->files[i].path);
    free(p->files);
    free(p->shards);
    memset(p, 0, sizeof *p);
}
