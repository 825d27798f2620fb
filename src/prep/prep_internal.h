/*
 * prep_internal.h - what the files of grit prep's driver share (prep.c:
 * plan, stages 1 and 3, thread pool; prep_dedup.c: stage 2; prep_report.c:
 * the report). Not a public interface: everything here is prep__-prefixed.
 */
#ifndef GRIT_PREP_INTERNAL_H
#define GRIT_PREP_INTERNAL_H
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/error.h"
#include "data/bpe.h"
#include "prep/dedup.h"
#include "prep/extract.h"
#include "prep/filter.h"
#include "prep/langid.h"
#include "prep/plan.h"
#include "prep/prep.h"
#include "prep/prep_s3.h"
#include "prep/urlfilter.h"

/* docs/NNNNN.sig: magic (8), u32 documents, u32 bands, then per document:
 * u64 URL hash, u64 exact hash, u32 text bytes, u16 URL length, the URL,
 * u64 band keys[bands]; integers little-endian (host order, x86/ARM). */
#define SIG_MAGIC "GPSIG01\n"

enum { ST_DOCS = 0, ST_TOKENIZE = 1 };

/* One run of the pipeline; skipped/ran are per stage: docs, dedup, tokenize. */
typedef struct run {
    const prep_cfg *c;
    const prep_hooks *h;
    plan pl;
    bpe *tok;
    uint32_t eod;
    int dtype;
    comm *cm;                 /* the ranks of this run (world of 1 without MPI) */
    urlf *uf;                 /* URL block-list (NULL: none); shared by the threads */
    uint64_t uf_hash;
    int rank, size;
    size_t *mine, n_mine;     /* the shards this rank owns: s with s mod size == rank */
    int quiet;                /* no progress lines (quiet, or not rank 0) */
    uint64_t *first_doc;      /* global index of each shard's first kept document */
    uint64_t n_docs;          /* stage-1 documents in all shards */
    int stage;
    atomic_size_t next;
    atomic_size_t done;
    atomic_ullong docs, bytes;
    atomic_int failed;
    pthread_mutex_t mu;
    grit_err err;
    char errmsg[1024];
    size_t skipped[3], ran[3];
} run;

typedef struct tctx {
    run *r;
    langid *lid;
    filter_scratch fs;
    minhash mh;
    prep_buf tx, docs, sig, drops, keep;
    bpe_ctx *bc;
    bpe_ids ids;
    prep_s3 *s3;   /* opened at the first s3:// input of this thread */
} tctx;

/* OUTPUT/fmt with the shard number formatted in, and OUTPUT/name. */
void prep__pathf(char *buf, size_t cap, const run *r, const char *fmt, size_t shard);
void prep__pathn(char *buf, size_t cap, const run *r, const char *name);
int prep__exists(const char *p);
/* Statistics objects: obj[a][b] += v; "stages"[stage] counters; sums. */
void prep__jadd(json_t *obj, const char *a, const char *b, double v, int integer);
void prep__stage_add(json_t *st, const char *stage, double din, double dout, double bin,
                     double bout);
void prep__stage_time(json_t *st, const char *stage, double sec);
void prep__jsum(json_t *dst, json_t *src);
/* Durable JSON file; a marker also calls the on_marker hook. */
grit_err prep__write_json(const char *path, json_t *o);
grit_err prep__write_marker(run *r, const char *path, json_t *o);
/* Every rank calls it with its own result: returns rc if it failed (its
 * message kept), an error naming what when another rank failed, else
 * GRIT_OK. Collective (an all-reduce): all ranks call it at the same points. */
grit_err prep__agree(run *r, grit_err rc, const char *what);
/* Appends o as one compact JSON line and releases o. */
grit_err prep__put_jsonl(prep_buf *b, json_t *o);

/* Stage 2 (prep_dedup.c): reads every docs/NNNNN.sig, writes dedup/keep.bin,
 * dedup/drops.jsonl and the marker done/dedup.json; skipped when done. */
grit_err prep__stage_dedup(run *r);
/* r->first_doc and r->n_docs from the docs markers. */
grit_err prep__shard_offsets(run *r);
/* prep_output.c: o["files"] = shard s's result files with sizes and XXH3;
 * manifest.json and data_mix.json from the tokenize markers (rank 0); the
 * upload to c->publish (collective). */
grit_err prep__hash_outputs(run *r, size_t s, json_t *o);
grit_err prep__write_manifest(run *r);
grit_err prep__write_data_mix(run *r);
grit_err prep__publish(run *r);
/* report.json and the table (prep_report.c), summed from all markers. */
grit_err prep__report(run *r, double wall);

#endif
