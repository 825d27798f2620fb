/*
 * config.h - the training configuration: parse, validate, resolve, write.
 *
 * A config file is a JSON object:
 *   {"model": "pythia-14m" | {"preset": "...", <overrides>} | {<every field>},
 *    "optim": {...}, "seed": 1234, "threads": 2,
 *    "data": {"source": "synthetic", "synthetic_vocab": 512}
 *          | {"source": "megatron", "paths": ["PREFIX", ...],
 *             "weights": [w, ...], "split": "969,30,1"}
 *          | {"source": "sft", "paths": ["PREFIX"], "split": "98,2,0", "pack": true},
 *    "run_dir": "runs/demo", "log_every": 1, "precision": "fp32" | "bf16",
 *    "recompute": "none" | "full",
 *    "parallel": {"tensor": 1, "pipeline": 1, "data": 0, "zero": 0}}  (train/parallel.h)
 * Every unknown field, wrong type and out-of-range value is an error naming
 * the file, line:column, field and what was expected (core/jcfg.h). The
 * resolved config (every default filled in) is what the run directory keeps.
 */
#ifndef GRIT_TRAIN_CONFIG_H
#define GRIT_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "model/gptneox.h"
#include "s3/client.h"
#include "train/optim.h"

#define TRAIN_DATA_MAX_PATHS 64

typedef struct train_cfg {
    char preset[32];       /* "" when every field was given */
    gx_config model;
    int vocab_divisor;     /* make_vocab_size_divisible_by */
    optim_cfg optim;
    uint64_t seed;
    int threads;
    gx_precision precision; /* "precision": fp32 (default) or bf16 (model/gptneox.h) */
    bool recompute;         /* "recompute": "none" (default) or "full": one layer's activations
                             * kept, each recomputed in the backward (gx_set_recompute) */
    char data_source[16];  /* "synthetic" or "megatron" */
    int synthetic_vocab;   /* tokens used by the synthetic stream */
    /* "megatron": .bin/.idx prefixes, blended by weight (data/gptdataset.h) */
    int data_npaths;
    char data_paths[TRAIN_DATA_MAX_PATHS][512];
    double data_weights[TRAIN_DATA_MAX_PATHS]; /* as given (1 each when absent) */
    bool data_has_weights;
    char data_split[64];   /* Megatron's train,valid,test shares */
    bool data_pack;        /* "sft": pack short examples into rows (else one per row, padded) */
    char run_dir[1024];
    int log_every;
    /* checkpoints (src/ckpt): in run_dir/ckpt */
    int ckpt_interval_steps;     /* 0: by steps off */
    double ckpt_interval_minutes; /* 0: by time off */
    int ckpt_keep_last;
    int ckpt_keep_every;         /* also keep every step that is a multiple (0: none) */
    bool ckpt_async;
    bool ckpt_stop_on_error;     /* on_error "stop" (else "continue") */
    bool resume;                 /* resume from run_dir/ckpt automatically */
    char ckpt_dir[1024];         /* "dir": where checkpoints go ("" = run_dir/ckpt; s3://...) */
    char ckpt_cache[1024];       /* "cache_dir": local first tier in front of dir ("" none) */
    s3_opts ckpt_s3;             /* "s3": {endpoint, region, part_size_mib, concurrency,
                                    retries, unsigned_payload} for an s3:// dir */
    int world;                   /* data-parallel ranks (runtime, not in the file; 1 default) */
    int tp, pp, dp;              /* "parallel": tensor, pipeline, data (0: derived); parallel.h */
    bool sp;                     /* "parallel.sequence": sequence parallelism (tensor > 1) */
    char init_from[1024];        /* weights-only start from a checkpoint or HF folder ("" none) */
    /* validation (train/validate.h): outside the fingerprint, it changes no weight */
    int eval_interval_steps;     /* "eval.interval_steps": 0 off */
    int eval_samples;            /* "eval.samples": held-out sequences of seq_len + 1 tokens */
    bool eval_at_checkpoint;     /* "eval.at_checkpoint": also at every checkpoint step */
} train_cfg;

/* Defaults for everything (model pythia-14m). */
void train_cfg_defaults(train_cfg *c);

/* Parses path over the defaults. */
grit_err train_cfg_load(train_cfg *c, const char *path);
/* Same, from a string; name is used in messages. */
grit_err train_cfg_load_string(train_cfg *c, const char *name, const char *text);

/* The resolved config as JSON text (caller frees). */
char *train_cfg_dump(const train_cfg *c);

/* Hex xxh3-64 of what decides the numbers of a run (model, optim, seed, data),
 * stored in checkpoints: resuming under a different one is refused. */
void train_cfg_fingerprint(const train_cfg *c, char out[17]);

/* With optim.global_batch set, derives grad_accum for a world size. */
grit_err train_cfg_resolve_world(train_cfg *c, int world);

/* True when checkpointing is on (by steps or by minutes). */
bool train_cfg_ckpt_enabled(const train_cfg *c);

#endif
