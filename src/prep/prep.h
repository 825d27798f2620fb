/*
 * prep.h - `grit prep`: raw web pages -> clean, deduplicated, tokenized
 * training shards, in three resumable stages over shards of input.
 *
 *   inputs --plan--> shards (a WARC or JSONL file each; up to
 *                    files_per_shard HTML / text files each)
 *   1 docs      per shard, parallel: read -> URL block-list -> extract (HTML) -> langid ->
 *               quality filters + line corrections -> signatures (URL
 *               hash, exact hash, MinHash band keys)
 *               writes docs/NNNNN.jsonl (kept documents), docs/NNNNN.sig,
 *               docs/NNNNN.drops.jsonl
 *   2 dedup     global, over all ranks (prep_dedup.c): URL dedup (WARC
 *               URLs), exact dedup, MinHash-LSH + union-find; the smallest
 *               document id (input order) survives in each group
 *               writes dedup/NNNNN.keep (one byte per document) and
 *               dedup/NNNNN.drops.jsonl per shard
 *   3 tokenize  per shard, parallel: kept documents, each repeated by its
 *               source's weight (mixing), -> tokens/NNNNN.{bin,idx} (or
 *               text/NNNNN.jsonl without a tokenizer)
 *   report.json and a table on stderr, summed from the markers;
 *   manifest.json (every output file, size and hash) last.
 *
 * Ranks. Under MPI (comm.h) every rank runs prep_run with the same
 * configuration on a shared output directory: shard s belongs to rank
 * s mod size for stages 1 and 3, dedup exchanges keys by hash owner, rank 0
 * writes plan.json, the dedup marker, the report and the manifest. Outputs
 * do not depend on the number of ranks (docs/prep.md).
 *
 * Resumability. Every (stage, shard) ends with a marker
 * done/<stage>.NNNNN.json (dedup: done/dedup.json) that holds the unit's
 * statistics; it is written (fs_write_durable) only after all of the unit's
 * outputs are durably in place, and a rerun skips every unit whose marker
 * exists. Outputs depend only on the inputs and the configuration, never on
 * thread count or timing, so a run killed at any point and rerun produces
 * byte-identical outputs. plan.json records a fingerprint of the inputs
 * and the configuration: rerunning into a directory made by a different
 * plan is an error, not a silent mix.
 *
 * Ownership: prep_cfg_* allocate and free the configuration's strings;
 * prep_run frees everything it allocates.
 */
#ifndef GRIT_PREP_PREP_H
#define GRIT_PREP_PREP_H
#include <stdint.h>
#include "core/error.h"
#include "prep/extract.h"
#include "prep/filter.h"

#define PREP_MAX_LANGS 64

typedef struct prep_source {
    char *name;
    char **inputs;   /* files or directories */
    int n_inputs;
    int format;      /* PREP_FMT_* (AUTO: by extension) */
    char *field;     /* JSONL text field, NULL = "text" */
    double weight;   /* copies of each kept document (fraction: sampled) */
    int curated;     /* "kind": 0 web (default), 1 curated (books, papers, ...) */
} prep_source;

typedef struct prep_cfg {
    char *output;                      /* local (shared) directory: all work and results */
    char *publish;                     /* s3://bucket/prefix for the results; NULL: none */
    prep_source *sources;
    int n_sources;
    int threads;
    int files_per_shard;
    int langid_backend;                /* LANGID_* */
    char langs[PREP_MAX_LANGS][8];     /* kept languages; n_langs 0 = keep all */
    int n_langs;
    double min_lang_score;
    extract_opts extract;
    filter_cfg filters;
    char *url_blocklist;               /* URL block-list file (urlfilter.h); NULL: none */
    double curated_fraction;           /* data_mix.json: curated share of the tokens;
                                          < 0: as produced (default -1) */
    int url_dedup, exact_dedup;
    int mh_bands, mh_rows, mh_ngram;   /* mh_bands 0: no fuzzy dedup */
    char *tokenizer;                   /* HF tokenizer.json; NULL: text output */
    char *eod;                         /* end-of-document token */
    int quiet;
} prep_cfg;

/* Defaults: 2 threads, 64 files per shard, CLD2, English + the RefinedWeb-
 * Europe languages (de es fr it pt pl nl ro sv cs), score >= 0.65, Gopher
 * filters on, URL and exact dedup on, MinHash refinedweb (20 x 450, 5-grams). */
void prep_cfg_default(prep_cfg *c);
/* Reads a JSON config (fields in README "grit prep") over the current
 * values; errors name file:line:col and the field. */
grit_err prep_cfg_load(prep_cfg *c, const char *path);
/* Sets the MinHash preset by name: refinedweb, cheap, off. */
grit_err prep_cfg_minhash_preset(prep_cfg *c, const char *name);
/* Adds an input to the source named "default" (created on first use). */
grit_err prep_cfg_add_input(prep_cfg *c, const char *path);
void prep_cfg_free(prep_cfg *c);

typedef struct prep_hooks {
    /* after each marker is durable (may be NULL); for fault injection */
    void (*on_marker)(void *arg, const char *marker_path);
    void *arg;
} prep_hooks;

struct comm;
/* Runs (or resumes) the pipeline. On error, the message names the file and
 * what was wrong; finished units stay finished. cm: the ranks to share the
 * work with (every rank calls prep_run with the same configuration; the
 * output directory is shared by them); NULL: this process alone. */
grit_err prep_run(const prep_cfg *c, const prep_hooks *h, struct comm *cm);

#endif
