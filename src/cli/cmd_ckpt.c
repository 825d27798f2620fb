/*
 * cmd_ckpt.c - `grit ckpt ls | verify | export | import | prune`.
 *
 * Each takes a checkpoint directory (RUN_DIR/ckpt) or a run directory (its
 * ckpt/ is used). export writes a Hugging Face folder from one step;
 * import turns a Hugging Face GPTNeoX, Llama or Falcon folder (sharded or not)
 * into a verified step_00000000.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/hf_family.h"
#include "cli/cli.h"
#include "core/fsutil.h"
#include "train/train.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit ckpt <command> ...\n"
            "\n"
            "  ls DIR                      list checkpoints: step, size, verification\n"
            "  verify DIR [STEP]           verify every checkpoint (or STEP): sizes and xxh3 of\n"
            "                              every file against the manifest; exit 1 if any fails\n"
            "  export DIR STEP OUT [--tokenizer FILE] [--dtype f32|bf16]\n"
            "                              write a Hugging Face folder (model.safetensors,\n"
            "                              config.json, tokenizer file) loadable by transformers;\n"
            "                              --dtype bf16 rounds the F32 master weights to\n"
            "                              bfloat16 (nearest even; half the size; torch_dtype\n"
            "                              bfloat16 in config.json); default f32\n"
            "  import HF_DIR OUT_DIR       turn a Hugging Face GPTNeoX, Llama or Falcon folder\n"
            "                              (config.json, model.safetensors or shards named by\n"
            "                              model.safetensors.index.json; F32/F16/BF16) into\n"
            "                              OUT_DIR/ckpt/step_00000000 (for \"init_from\");\n"
            "                              see docs/models.md\n"
            "  prune DIR --keep-last K [--keep-every M]\n"
            "                              remove old checkpoints (and stale .tmp folders)\n"
            "\n"
            "DIR is a run directory or its ckpt/ folder, or (ls, verify, prune)\n"
            "s3://BUCKET/PREFIX with AWS_* credentials and AWS_ENDPOINT_URL from the\n"
            "environment (see grit s3 --help).\n");
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Opens DIR/ckpt when DIR is a run directory, DIR itself otherwise. */
static store *open_ckpt(const char *dir)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/ckpt", dir);
    if (!strncmp(dir, "s3://", 5)) { /* credentials and endpoint from the environment */
        store *s3 = NULL;
        if (store_open_s3(dir, NULL, &s3) != GRIT_OK)
            fprintf(stderr, "grit ckpt: %s\n", grit_errmsg());
        return s3;
    }
    if (!is_dir(dir)) {
        fprintf(stderr, "grit ckpt: %s: not a directory\n", dir);
        return NULL;
    }
    store *s = NULL;
    if (store_open_posix(is_dir(p) ? p : dir, &s) != GRIT_OK) {
        fprintf(stderr, "grit ckpt: %s\n", grit_errmsg());
        return NULL;
    }
    return s;
}

typedef struct bytes_acc {
    store *s;
    const char *dir;
    double total;
} bytes_acc;

static void add_size(void *ctx, const char *name)
{
    bytes_acc *a = ctx;
    char p[512];
    size_t n;
    snprintf(p, sizeof p, "%s/%s", a->dir, name);
    if (a->s->ops->size(a->s, p, &n) == GRIT_OK)
        a->total += (double)n;
}

/* Every file of the folder (a data-parallel save has one optimiser shard per rank). */
static double dir_bytes(store *s, const char *d)
{
    bytes_acc a = {s, d, 0};
    s->ops->list(s, d, add_size, &a);
    return a.total;
}

static int cmd_ls_verify(int argc, char **argv, int verify_only)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    long only = -1;
    if (verify_only && argc > 2 && cli_long("ckpt verify", "STEP", argv[2], 0, LONG_MAX, &only))
        return 2;
    store *s = open_ckpt(argv[1]);
    if (!s)
        return 2;
    long *steps = NULL;
    int n = 0, bad = 0, shown = 0;
    if (ckpt_list(s, &steps, &n) != GRIT_OK) {
        fprintf(stderr, "grit ckpt: %s\n", grit_errmsg());
        store_close(s);
        return 2;
    }
    char *latest = NULL;
    store_read_all(s, "LATEST", &latest, NULL);
    printf("%-15s %10s  %-7s %s\n", "checkpoint", "size", "latest", "verification");
    for (int i = 0; i < n; i++) {
        if (only >= 0 && steps[i] != only)
            continue;
        char d[64], why[512];
        ckpt_dirname(d, sizeof d, steps[i]);
        int ok = ckpt_verify(s, d, why, sizeof why) == GRIT_OK;
        bad += !ok;
        shown++;
        int is_latest = latest && !strncmp(latest, d, strlen(d));
        printf("%-15s %8.1f MB  %-7s %s%s\n", d, dir_bytes(s, d) / 1e6, is_latest ? "yes" : "",
               ok ? "ok" : "CORRUPT: ", ok ? "" : why);
    }
    if (only >= 0 && !shown) {
        fprintf(stderr, "grit ckpt: no checkpoint for step %ld in %s\n", only, s->root);
        bad = 1;
    }
    printf("%d checkpoint(s), %d failed verification\n", shown, bad);
    free(latest);
    free(steps);
    store_close(s);
    return bad ? 1 : 0;
}

static int copy_file(const char *from, const char *to)
{
    char *buf = NULL;
    size_t len = 0;
    if (fs_read_all(from, &buf, &len) != GRIT_OK || fs_write_durable(to, buf, len) != GRIT_OK) {
        fprintf(stderr, "grit ckpt: %s\n", grit_errmsg());
        free(buf);
        return -1;
    }
    free(buf);
    return 0;
}

/* Loads a model (layout from config.json in HF form) from a store directory. */
static int load_model(store *s, const char *dir, gx_model *m)
{
    char p[256], what[2400], *text = NULL;
    gx_config cfg;
    snprintf(p, sizeof p, "%s/config.json", dir);
    snprintf(what, sizeof what, "%s/%s", s->root, p);
    int inited = 0, rc = -1;
    if (store_read_all(s, p, &text, NULL) == GRIT_OK && hf_family_config_parse(what, text, &cfg) == GRIT_OK &&
        ckpt_weights_fit(s, dir, &cfg) == GRIT_OK && (inited = gx_init(m, &cfg, 1, 1, 1) == GRIT_OK) &&
        ckpt_load(s, dir, m, NULL, true) == GRIT_OK)
        rc = 0;
    if (rc) {
        fprintf(stderr, "grit ckpt: %s\n", grit_errmsg());
        if (inited)
            gx_free(m); /* the caller frees the model only when it loaded */
    }
    free(text);
    return rc;
}

static int cmd_export(int argc, char **argv)
{
    if (argc < 4) {
        usage(stderr);
        return 2;
    }
    const char *tok = NULL;
    int bf = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            tok = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "bf16") || !strcmp(d, "bfloat16"))
                bf = 1;
            else if (strcmp(d, "f32") && strcmp(d, "float32")) {
                fprintf(stderr, "grit ckpt export: --dtype: '%s', expected f32 or bf16\n", d);
                return 2;
            }
        } else {
            fprintf(stderr, "grit ckpt export: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    long step;
    if (cli_long("ckpt export", "STEP", argv[2], 0, LONG_MAX, &step))
        return 2;
    store *s = open_ckpt(argv[1]);
    if (!s)
        return 2;
    char d[64], why[512], out[2048];
    ckpt_dirname(d, sizeof d, step);
    if (ckpt_verify(s, d, why, sizeof why) != GRIT_OK) {
        fprintf(stderr, "grit ckpt export: %s/%s does not verify: %s\n", s->root, d, why);
        store_close(s);
        return 1;
    }
    gx_model m;
    int rc = 1;
    if (load_model(s, d, &m) != 0)
        goto out;
    if (fs_mkdirs(argv[3]) != GRIT_OK) {
        fprintf(stderr, "grit ckpt export: %s\n", grit_errmsg());
        goto out_m;
    }
    snprintf(out, sizeof out, "%s/model.safetensors", argv[3]);
    if ((bf ? train_save_weights_bf16(&m, out) : train_save_weights(&m, out)) != GRIT_OK) {
        fprintf(stderr, "grit ckpt export: %s\n", grit_errmsg());
        goto out_m;
    }
    char *cj = hf_family_config_json(&m.cfg);
    if (cj && bf) { /* the dtype the weights are stored in */
        json_t *j = json_loads(cj, 0, NULL);
        free(cj);
        cj = NULL;
        if (j && json_object_set_new(j, "torch_dtype", json_string("bfloat16")) == 0)
            cj = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        json_decref(j);
    }
    snprintf(out, sizeof out, "%s/config.json", argv[3]);
    grit_err e = cj ? fs_write_durable(out, cj, strlen(cj)) : GRIT_EINVAL;
    free(cj);
    if (e != GRIT_OK) {
        fprintf(stderr, "grit ckpt export: %s\n", grit_errmsg());
        goto out_m;
    }
    if (tok) {
        snprintf(out, sizeof out, "%s/tokenizer.json", argv[3]);
        if (copy_file(tok, out) != 0)
            goto out_m;
    }
    printf("exported %s/%s -> %s (model.safetensors%s, config.json%s)\n", s->root, d, argv[3],
           bf ? " in BF16" : "", tok ? ", tokenizer.json" : "");
    rc = 0;
out_m:
    gx_free(&m);
out:
    store_close(s);
    return rc;
}

static int cmd_import(int argc, char **argv)
{
    if (argc != 3) {
        usage(stderr);
        return 2;
    }
    store *src = NULL, *dst = NULL;
    char p[2048];
    if (store_open_posix(argv[1], &src) != GRIT_OK) {
        fprintf(stderr, "grit ckpt import: %s\n", grit_errmsg());
        return 2;
    }
    gx_model m;
    int rc = 1;
    if (load_model(src, ".", &m) != 0)
        goto out;
    snprintf(p, sizeof p, "%s/ckpt", argv[2]);
    if (store_open_posix(p, &dst) != GRIT_OK) {
        fprintf(stderr, "grit ckpt import: %s\n", grit_errmsg());
        goto out_m;
    }
    /* step 0, fresh optimiser state, no training config yet (fingerprint of nothing) */
    ckpt_state st = {.step = 0, .threads = 1, .world_size = 1};
    snprintf(st.fingerprint, sizeof st.fingerprint, "%016x", 0);
    double bytes = 0;
    if (ckpt_save(dst, &m, m.params, m.adam_m, m.adam_v, &st, &bytes) != GRIT_OK) {
        fprintf(stderr, "grit ckpt import: %s\n", grit_errmsg());
        goto out_m;
    }
    printf("imported %s -> %s/step_00000000 (%.2fM parameters, %.1f MB); train from it with "
           "\"init_from\": \"%s/step_00000000\"\n",
           argv[1], dst->root, (double)m.num_params / 1e6, bytes / 1e6, dst->root);
    rc = 0;
out_m:
    gx_free(&m);
out:
    store_close(src);
    store_close(dst);
    return rc;
}

static int cmd_prune(int argc, char **argv)
{
    long keep_last = -1, keep_every = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--keep-last") && i + 1 < argc) {
            if (cli_long("ckpt prune", "--keep-last", argv[++i], 1, LONG_MAX, &keep_last))
                return 2;
        } else if (!strcmp(argv[i], "--keep-every") && i + 1 < argc) {
            if (cli_long("ckpt prune", "--keep-every", argv[++i], 0, LONG_MAX, &keep_every))
                return 2;
        } else {
            fprintf(stderr, "grit ckpt prune: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (argc < 2 || keep_last < 1) {
        fprintf(stderr, "grit ckpt prune: DIR and --keep-last K (K >= 1) are required\n");
        return 2;
    }
    store *s = open_ckpt(argv[1]);
    if (!s)
        return 2;
    int removed = 0;
    grit_err e = ckpt_prune(s, (int)keep_last, keep_every, -1, &removed);
    if (e != GRIT_OK)
        fprintf(stderr, "grit ckpt prune: %s\n", grit_errmsg());
    else
        printf("removed %d checkpoint(s) from %s\n", removed, s->root);
    store_close(s);
    return e == GRIT_OK ? 0 : 1;
}

int cmd_ckpt(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    const char *sub = argv[1];
    if (!strcmp(sub, "ls"))
        return cmd_ls_verify(argc - 1, argv + 1, 0);
    if (!strcmp(sub, "verify"))
        return cmd_ls_verify(argc - 1, argv + 1, 1);
    if (!strcmp(sub, "export"))
        return cmd_export(argc - 1, argv + 1);
    if (!strcmp(sub, "import"))
        return cmd_import(argc - 1, argv + 1);
    if (!strcmp(sub, "prune"))
        return cmd_prune(argc - 1, argv + 1);
    fprintf(stderr, "grit ckpt: unknown command '%s'\n\n", sub);
    usage(stderr);
    return 2;
}
