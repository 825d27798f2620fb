/*
 * plan.h - the shard plan of a grit prep run: which input files make up
 * which shard.
 *
 * Each source's inputs are expanded (directories walked recursively, names
 * in byte order, hidden entries and non-document files skipped; an
 * s3://bucket/prefix lists the objects under it the same way, prep_s3.h). A WARC or JSONL file is a shard of
 * its own; consecutive HTML / text files of one source are grouped, up to
 * files_per_shard per shard. Shard numbers follow this order, so the same
 * inputs and settings always give the same plan; plan_fingerprint hashes
 * it (paths, formats, sizes, shard bounds) together with a caller
 * string (the configuration).
 *
 * Ownership: plan_build allocates, plan_free frees.
 */
#ifndef GRIT_PREP_PLAN_H
#define GRIT_PREP_PLAN_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "prep/prep.h"

typedef struct plan_file {
    char *path;
    int format;     /* resolved PREP_FMT_* */
    uint64_t size;
} plan_file;

typedef struct plan_shard {
    int source;
    size_t first, count; /* files[first .. first+count) */
} plan_shard;

typedef struct plan {
    plan_file *files;
    size_t n_files;
    plan_shard *shards;
    size_t n_shards;
    uint64_t bytes;
} plan;

grit_err plan_build(plan *p, const prep_cfg *c);
uint64_t plan_fingerprint(const plan *p, const char *config_text);
void plan_free(plan *p);

#endif
