/*
 * prep_output.c - what grit prep writes about its results once they exist
 * (rank 0 unless said): the XXH3 of each shard's result files (each rank,
 * into its tokenize marker), manifest.json, data_mix.json (the trainer's
 * "data" object, docs/prep.md "Data mix"), and the upload of the results to
 * an s3:// output in the checkpoint store's commit order (every rank its
 * shards; manifest.json last).
 */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "prep/prep_internal.h"

/* Files that are outputs of shard s (tokens or text), with their sizes and
 * XXH3-64 hashes, into o["files"]: the manifest is built from them. */
grit_err prep__hash_outputs(run *r, size_t s, json_t *o)
{
    static const char *const tok[] = {"tokens/%05zu.bin", "tokens/%05zu.idx", NULL};
    static const char *const txt[] = {"text/%05zu.jsonl", NULL};
    json_t *files = json_object();
    grit_err rc = files ? GRIT_OK : GRIT_ENOMEM;
    for (const char *const *f = r->tok ? tok : txt; rc == GRIT_OK && *f; f++) {
        char p[4096], name[64], hex[20];
        prep__pathf(p, sizeof p, r, *f, s);
        snprintf(name, sizeof name, *f, s);
        char *b = NULL;
        size_t n = 0;
        if ((rc = fs_read_all(p, &b, &n)) != GRIT_OK)
            break;
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH3_64bits(b, n));
        free(b);
        json_object_set_new(files, name, json_pack("{s:I, s:s}", "bytes", (json_int_t)n,
                                                    "xxh3", hex));
    }
    if (rc == GRIT_OK)
        json_object_set_new(o, "files", files);
    else
        json_decref(files);
    return rc;
}

/* manifest.json (rank 0, last): every output file of every shard with its
 * size and hash, and the documents and tokens per shard, from the tokenize
 * markers. Written after the report, so a manifest names complete data. */
grit_err prep__write_manifest(run *r)
{
    json_t *m = json_pack("{s:s, s:i, s:s, s:[]}", "format", "grit-prep", "version", 1,
                          "output", r->tok ? "megatron" : "jsonl", "shards");
    json_t *arr = m ? json_object_get(m, "shards") : NULL;
    grit_err rc = m ? GRIT_OK : GRIT_ENOMEM;
    json_int_t docs = 0, toks = 0;
    for (size_t s = 0; rc == GRIT_OK && s < r->pl.n_shards; s++) {
        char p[4096], prefix[64];
        prep__pathf(p, sizeof p, r, "done/tokenize.%05zu.json", s);
        json_error_t je;
        json_t *o = json_load_file(p, 0, &je);
        if (!o) {
            rc = grit_errf(GRIT_EFORMAT, "%s: %s", p, je.text);
            break;
        }
        json_int_t d = json_integer_value(json_object_get(json_object_get(
                           json_object_get(o, "stages"), "tokenize"), "docs_out"));
        json_int_t t = json_integer_value(json_object_get(json_object_get(o, "output"),
                                                          "tokens"));
        snprintf(prefix, sizeof prefix, r->tok ? "tokens/%05zu" : "text/%05zu", s);
        const char *srcname = r->c->sources[r->pl.shards[s].source].name;
        json_array_append_new(arr, json_pack("{s:I, s:s, s:s, s:I, s:I, s:O}", "shard",
                                             (json_int_t)s, "prefix", prefix, "source", srcname,
                                             "documents", d, "tokens", t, "files",
                                             json_object_get(o, "files")));
        docs += d;
        toks += t;
        json_decref(o);
    }
    if (rc == GRIT_OK) {
        json_object_set_new(m, "documents", json_integer(docs));
        json_object_set_new(m, "tokens", json_integer(toks));
        char p[4096];
        prep__pathn(p, sizeof p, r, "manifest.json");
        rc = prep__write_json(p, m);
    }
    json_decref(m);
    return rc;
}

/* 1 when the marker at path exists and names url (a publish to another URL
 * is not done). */
static int published(const char *path, const char *url)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    const char *u = json_string_value(json_object_get(o, "url"));
    int yes = u && !strcmp(u, url);
    json_decref(o);
    return yes;
}

/* Uploads OUTPUT/name to PUBLISH/name. */
static grit_err put_one(run *r, prep_s3 *s3, const char *name)
{
    char local[4096], url[4096];
    prep__pathn(local, sizeof local, r, name);
    snprintf(url, sizeof url, "%s/%s", r->c->publish, name);
    return prep_s3_put_file(s3, local, url);
}

/* The results to s3:// in the checkpoint store's commit order: the old
 * manifest removed first, then every shard's files (each rank its own, a
 * marker done/publish.NNNNN.json per shard), then report.json, and
 * manifest.json last (rank 0), then done/publish.json. A reader trusts a
 * prefix only with its manifest, whose sizes and hashes name the data. */
grit_err prep__publish(run *r)
{
    const char *pub = r->c->publish;
    char m[4096];
    prep__pathn(m, sizeof m, r, "done/publish.json");
    if (published(m, pub)) {
        if (!r->quiet)
            fprintf(stderr, "grit prep: publish: already done, skipped\n");
        return GRIT_OK;
    }
    prep_s3 *s3 = NULL;
    grit_err rc = prep_s3_open(&s3);
    json_t *mk = json_pack("{s:s}", "url", pub);
    if (rc == GRIT_OK && !mk)
        rc = GRIT_ENOMEM;
    if (rc == GRIT_OK && r->rank == 0) {
        char url[4096];
        snprintf(url, sizeof url, "%s/manifest.json", pub);
        rc = prep_s3_delete(s3, url);
    }
    rc = prep__agree(r, rc, "publish (old manifest)");
    for (size_t i = 0; rc == GRIT_OK && i < r->n_mine; i++) {
        size_t s = r->mine[i];
        char name[64];
        prep__pathf(m, sizeof m, r, "done/publish.%05zu.json", s);
        if (published(m, pub))
            continue;
        snprintf(name, sizeof name, r->tok ? "tokens/%05zu.bin" : "text/%05zu.jsonl", s);
        rc = put_one(r, s3, name);
        if (rc == GRIT_OK && r->tok) {
            snprintf(name, sizeof name, "tokens/%05zu.idx", s);
            rc = put_one(r, s3, name);
        }
        if (rc == GRIT_OK)
            rc = prep__write_marker(r, m, mk);
    }
    rc = prep__agree(r, rc, "publish (data)");
    if (rc == GRIT_OK && r->rank == 0) {
        rc = put_one(r, s3, "report.json");
        if (rc == GRIT_OK && r->tok)
            rc = put_one(r, s3, "data_mix.json");
        if (rc == GRIT_OK)
            rc = put_one(r, s3, "manifest.json");
        prep__pathn(m, sizeof m, r, "done/publish.json");
        if (rc == GRIT_OK)
            rc = prep__write_marker(r, m, mk);
        if (rc == GRIT_OK && !r->quiet)
            fprintf(stderr, "grit prep: published to %s (manifest.json last)\n", pub);
    }
    json_decref(mk);
    prep_s3_close(s3);
    return prep__agree(r, rc, "publish");
}

/* data_mix.json (rank 0, after the manifest): the trainer's "data" object
 * for these shards, {"source": "megatron", "paths": [...], "weights": [...]},
 * one path per shard (local, or under the publish URL) weighted by the
 * tokens it holds; with mix.curated_fraction f, the curated sources' shards
 * share f of the weight and the web ones 1 - f, each in proportion to its
 * tokens. The trainer normalises the weights. */
grit_err prep__write_data_mix(run *r)
{
    if (!r->tok)
        return GRIT_OK;
    size_t n = r->pl.n_shards;
    double *tok = calloc(n + 1, sizeof *tok), kind_tok[2] = {0, 0};
    json_t *o = json_pack("{s:s, s:[], s:[]}", "source", "megatron", "paths", "weights");
    grit_err rc = tok && o ? GRIT_OK : GRIT_ENOMEM;
    for (size_t s = 0; rc == GRIT_OK && s < n; s++) {
        char p[4096];
        prep__pathf(p, sizeof p, r, "done/tokenize.%05zu.json", s);
        json_error_t je;
        json_t *m = json_load_file(p, 0, &je);
        if (!m) {
            rc = grit_errf(GRIT_EFORMAT, "%s: %s", p, je.text);
            break;
        }
        tok[s] = (double)json_integer_value(json_object_get(json_object_get(m, "output"),
                                                            "tokens"));
        kind_tok[r->c->sources[r->pl.shards[s].source].curated] += tok[s];
        json_decref(m);
    }
    double f = r->c->curated_fraction;
    int target = f >= 0 && kind_tok[0] > 0 && kind_tok[1] > 0;
    double total = kind_tok[0] + kind_tok[1];
    for (size_t s = 0; rc == GRIT_OK && s < n; s++) {
        if (tok[s] <= 0)
            continue; /* an empty shard cannot be sampled */
        int k = r->c->sources[r->pl.shards[s].source].curated;
        double w = target ? (k ? f : 1 - f) * tok[s] / kind_tok[k] : tok[s] / total;
        char path[4096];
        if (r->c->publish)
            snprintf(path, sizeof path, "%s/tokens/%05zu", r->c->publish, s);
        else
            prep__pathf(path, sizeof path, r, "tokens/%05zu", s);
        json_array_append_new(json_object_get(o, "paths"), json_string(path));
        json_array_append_new(json_object_get(o, "weights"), json_real(w));
    }
    if (rc == GRIT_OK) {
        char p[4096];
        prep__pathn(p, sizeof p, r, "data_mix.json");
        rc = prep__write_json(p, o);
    }
    free(tok);
    json_decref(o);
    return rc;
}
