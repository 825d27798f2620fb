/*
 * fuzz.c - grit-fuzz: a deterministic, seeded mutation fuzzer over grit's parsers of
 * untrusted files, run in process on the real entry points:
 *
 *   config       train config JSON          train_cfg_load_string   (train/config.h)
 *   prepcfg      grit prep config JSON      prep_cfg_load           (prep/prep.h)
 *   hfconfig     Hugging Face config.json   hf_family_config_parse  (ckpt/hf_family.h)
 *   st_header    safetensors header JSON    st_parse                (ckpt/safetensors.h)
 *   safetensors  a whole model.safetensors  ckpt_load, weights only (ckpt/ckpt.h)
 *   shards       model.safetensors.index.json over two shards, ckpt_load
 *   manifest     checkpoint manifest.json   ckpt_verify + ckpt_find
 *   state        trainer_state.json         ckpt_read_state
 *   idx          Megatron .idx (+ .bin)     idx_open, then every idx_read (data/indexed.h)
 *   tokenizer    tokenizer.json             bpe_open_file, encode, decode (data/bpe.h)
 *   warc         WARC, plain and gzip'ed    prep_reader_open/next   (prep/reader.h)
 *   html         HTML page                  extract_html            (prep/extract.h)
 *
 * Each target starts from valid seeds (built here, or small files in tests/configs) and
 * mutates them: bit flips, byte sets/inserts/deletes, truncation (random or at a
 * structural byte), duplicated and spliced chunks, numbers replaced by edge values (0,
 * -1, 2^31, 2^63, 2^64, 1e309, NaN, ...), binary integer fields overwritten with edge
 * values (little-endian, at the format's field offsets), dictionary tokens (field names,
 * dtypes, tags), deep nesting (JSON and HTML, up to 100,000 levels) and invalid or
 * overlong UTF-8. Every input must end in success or a clean error: a grit_err with a
 * non-empty message that names the file (or `what`) where the API is given one.
 *
 * Case K of target T under seed S is a pure function of (S, T, K): a failure prints the
 * command that replays it (--seed S --target T --case K [--write FILE]). Inputs in
 * tests/fuzz/regress/<target>/ (the minimal inputs of bugs found) run first, every time.
 * A per-input watchdog (alarm) turns a hang into a failure naming the case; a per-target
 * time budget bounds the run. In the sanitizer build a crash, a sanitizer report or a leak
 * (LeakSanitizer checked after every input) fails the run and names the case.
 *
 *   grit-fuzz [--seconds S] [--seed N] [--target T[,T...]] [--case K] [--cases N]
 *             [--file F] [--write F] [--timeout S] [--dir D] [--list]
 *
 * --seconds defaults to GRIT_FUZZ_SECONDS or 60 (the whole run, split over the targets).
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <zlib.h>

#include "ckpt/ckpt.h"
#include "ckpt/hf_family.h"
#include "ckpt/safetensors.h"
#include "ckpt/store.h"
#include "core/error.h"
#include "data/bpe.h"
#include "data/indexed.h"
#include "model/gptneox.h"
#include "prep/extract.h"
#include "prep/prep.h"
#include "prep/reader.h"
#include "train/config.h"

#ifndef GRIT_FUZZ_SRC
#define GRIT_FUZZ_SRC "."
#endif

/* Sanitizer hooks, present only in the sanitizer build (weak: NULL elsewhere). */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
extern void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

#define FUZZ_MAX_INPUT ((size_t)4 << 20)

/* --- bytes and randomness ---------------------------------------------------------- */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void die(const char *what)
{
    fprintf(stderr, "grit-fuzz: %s\n", what);
    exit(2);
}

static void b_reserve(bytes *b, size_t n)
{
    if (n + 1 <= b->cap)
        return;
    size_t c = b->cap ? b->cap : 64;
    while (c < n + 1)
        c *= 2;
    if (!(b->p = realloc(b->p, c)))
        die("out of memory");
    b->cap = c;
}

static void b_set(bytes *b, const void *p, size_t n)
{
    b_reserve(b, n);
    if (n)
        memcpy(b->p, p, n);
    b->n = n;
    b->p[n] = 0;
}

static void b_insert(bytes *b, size_t at, const void *p, size_t n)
{
    if (at > b->n)
        at = b->n;
    b_reserve(b, b->n + n);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void b_erase(bytes *b, size_t at, size_t n)
{
    if (at >= b->n)
        return;
    if (n > b->n - at)
        n = b->n - at;
    memmove(b->p + at, b->p + at + n, b->n - at - n);
    b->n -= n;
    b->p[b->n] = 0;
}

/* splitmix64: the whole state of a case is one 64-bit word. */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n) { return n ? (size_t)(rnd(s) % n) : 0; }

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* --- targets ------------------------------------------------------------------------ */

enum { ACCEPTED = 0, REJECTED = 1, BAD = 2 };

typedef struct target {
    const char *name;
    void (*setup)(void);                      /* writes fixtures, adds seeds */
    int (*run)(const bytes *in, char *why, size_t cap);
    const char *const *dict;                  /* tokens to insert or swap in */
    const char *const *nest;                  /* openers for deep nesting */
    int binary;                               /* integer-field edits at field offsets */
    int json;                                 /* value-level edits of the parsed JSON */
    bytes seeds[16];
    int nseeds;
    size_t fields[24];                        /* binary field offsets of seed 0 */
    int nfields;
} target;

static char g_dir[1024];       /* scratch directory for files the parsers open */
static target *g_cur;          /* target being set up */

static void add_seed(const void *p, size_t n)
{
    if (g_cur->nseeds == (int)(sizeof g_cur->seeds / sizeof g_cur->seeds[0]))
        die("too many seeds");
    b_set(&g_cur->seeds[g_cur->nseeds++], p, n);
}

static void add_seed_str(const char *s) { add_seed(s, strlen(s)); }

static int read_file(const char *path, bytes *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    out->n = 0;
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        b_insert(out, out->n, buf, k);
    b_reserve(out, out->n);
    out->p[out->n] = 0;
    fclose(f);
    return 0;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "grit-fuzz: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

/* A failed call must leave a message, naming `name` where one is given (an
 * out-of-memory error may name nothing). */
static int verdict(grit_err rc, const char *name, const char *api, char *why, size_t cap)
{
    if (rc == GRIT_OK)
        return ACCEPTED;
    const char *m = grit_errmsg();
    if (!m[0]) {
        snprintf(why, cap, "%s: error %d (%s) with an empty message", api, rc, grit_strerror(rc));
        return BAD;
    }
    if (name && rc != GRIT_ENOMEM && !strstr(m, name)) {
        snprintf(why, cap, "%s: the message does not name %s: %s", api, name, m);
        return BAD;
    }
    snprintf(why, cap, "%s", m);
    return REJECTED;
}

/* ---- config: train config JSON ------------------------------------------------------ */

static const char *const json_dict[] = {
    "{", "}", "[", "]", ":", ",", "\"", "\\", "null", "true", "false", "\"\"", "{}", "[]",
    "\"model\"", "\"optim\"", "\"data\"", "\"preset\"", "\"pythia-14m\"", "\"llama-tiny\"",
    "\"hidden_size\"", "\"num_layers\"", "\"num_heads\"", "\"vocab_size\"", "\"seq_len\"",
    "\"micro_batch\"", "\"global_batch\"", "\"source\"", "\"megatron\"", "\"sft\"", "\"paths\"",
    "\"weights\"", "\"split\"", "\"checkpoint\"", "\"parallel\"", "\"s3\"", "\"dir\"",
    "\"precision\"", "\"bf16\"", "\"eval\"", "\"family\"", "\"kv_heads\"", "\"rope_scaling\"",
    "\"sources\"", "\"inputs\"", "\"extract\"", "\"dedup\"", "\"filters\"", "\"langid\"",
    "\"data_offsets\"", "\"shape\"", "\"dtype\"", "\"F32\"", "\"BF16\"", "\"F16\"", "\"I64\"",
    "\"__metadata__\"", "\"files\"", "\"size\"", "\"hash\"", "\"lo\"", "\"hi\"", "\"step\"",
    "\"model_type\"", "\"llama\"", "\"falcon\"", "\"gpt_neox\"", "\"\\u0000\"", "\"\\ud800\"",
    "1e999", "-0", "0.5", NULL};
static const char *const json_nest[] = {"[", "{\"a\":", "{\"model\":", "[{\"x\":[", NULL};

static void setup_config(void)
{
    static const char *const files[] = {"tiny.json", "ckpt.json", "ckpt_s3.json", "slurm_job.json",
                                        NULL};
    char p[2048];
    bytes b = {0};
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/tests/configs/%s", GRIT_FUZZ_SRC, files[i]);
        if (read_file(p, &b) == 0)
            add_seed(b.p, b.n);
    }
    snprintf(p, sizeof p, "%s/examples/demo.json", GRIT_FUZZ_SRC);
    if (read_file(p, &b) == 0)
        add_seed(b.p, b.n);
    free(b.p);
    add_seed_str(
        "{\"model\": {\"preset\": \"llama-tiny\", \"num_layers\": 1}, \"precision\": \"bf16\",\n"
        " \"optim\": {\"micro_batch\": 1, \"global_batch\": 4, \"seq_len\": 16, \"lr\": 1e-3,\n"
        "           \"total_steps\": 3},\n"
        " \"data\": {\"source\": \"megatron\", \"paths\": [\"a\", \"b\"], \"weights\": [1, 2],\n"
        "          \"split\": \"98,1,1\"},\n"
        " \"parallel\": {\"tensor\": 1, \"data\": 0, \"zero\": 1},\n"
        " \"eval\": {\"interval_steps\": 2, \"samples\": 4},\n"
        " \"checkpoint\": {\"interval_steps\": 2, \"keep_last\": 2, \"async\": true}, \"seed\": 7}\n");
    if (g_cur->nseeds < 2)
        die("tests/configs not found (GRIT_FUZZ_SRC)");
}

static int run_config(const bytes *in, char *why, size_t cap)
{
    train_cfg c;
    train_cfg_defaults(&c);
    grit_err rc = train_cfg_load_string(&c, "fuzz-config.json", (const char *)in->p);
    if (rc == GRIT_OK) {
        char *d = train_cfg_dump(&c); /* the resolved config must serialise */
        if (!d) {
            snprintf(why, cap, "train_cfg_dump returned NULL for an accepted config");
            return BAD;
        }
        free(d);
    }
    return verdict(rc, "fuzz-config.json", "train_cfg_load_string", why, cap);
}

/* ---- prepcfg: grit prep config JSON ------------------------------------------------- */

static void setup_prepcfg(void)
{
    add_seed_str(
        "{\"output\": \"out\", \"threads\": 2, \"files_per_shard\": 4, \"tokenizer\": \"t.json\",\n"
        " \"eod\": \"<|endoftext|>\", \"url_blocklist\": \"block.txt\",\n"
        " \"sources\": [{\"name\": \"web\", \"inputs\": [\"a.warc\", \"b.warc.gz\"], \"format\": "
        "\"warc\", \"weight\": 2},\n"
        "             {\"name\": \"books\", \"kind\": \"curated\", \"inputs\": [\"b.jsonl\"], "
        "\"field\": \"text\"}],\n"
        " \"mix\": {\"curated_fraction\": 0.2},\n"
        " \"langid\": {\"backend\": \"cld2\", \"languages\": [\"en\", \"de\"], \"min_score\": 0.5},\n"
        " \"extract\": {\"max_link_density\": 0.5, \"max_depth\": 100, \"max_bytes\": 100000},\n"
        " \"filters\": {\"min_words\": 5, \"max_words\": 100000, \"max_symbol_ratio\": 0.1,\n"
        "             \"max_top_ngram\": [0.2, 0.18, 0.16], \"disable\": [\"max_dup_lines\"]},\n"
        " \"dedup\": {\"url\": true, \"exact\": true, \"minhash\": \"cheap\", \"bands\": 4, "
        "\"rows\": 2, \"ngram\": 5}}\n");
    add_seed_str("{\"output\": \"o\", \"sources\": [{\"name\": \"x\", \"inputs\": [\"in\"]}],"
                 " \"langid\": {\"languages\": \"all\", \"backend\": \"textcat\"},"
                 " \"dedup\": {\"minhash\": \"off\"}}");
}

static int run_prepcfg(const bytes *in, char *why, size_t cap)
{
    char p[1200];
    path_in(p, sizeof p, "prep.json");
    write_file(p, in->p, in->n);
    prep_cfg c;
    prep_cfg_default(&c);
    grit_err rc = prep_cfg_load(&c, p);
    prep_cfg_free(&c);
    return verdict(rc, p, "prep_cfg_load", why, cap);
}

/* ---- hfconfig: Hugging Face config.json --------------------------------------------- */

static void setup_hfconfig(void)
{
    static const char *const presets[] = {"pythia-14m", "llama-tiny", "falcon-tiny",
                                          "falcon-tiny-new", "llama-3-8b", NULL};
    for (int i = 0; presets[i]; i++) {
        gx_config c;
        if (gx_preset(presets[i], &c) != GRIT_OK)
            die("preset");
        char *j = hf_family_config_json(&c);
        if (!j)
            die(grit_errmsg());
        add_seed_str(j);
        free(j);
    }
}

static int run_hfconfig(const bytes *in, char *why, size_t cap)
{
    gx_config c;
    grit_err rc = hf_family_config_parse("fuzz/config.json", (const char *)in->p, &c);
    if (rc == GRIT_OK && gx_config_check(&c) != GRIT_OK) {
        /* accepted by the parser, refused by the shape check: both are clean */
        return verdict(GRIT_ECONFIG, NULL, "gx_config_check", why, cap) == BAD ? BAD : REJECTED;
    }
    return verdict(rc, "fuzz/config.json", "hf_family_config_parse", why, cap);
}

/* ---- tiny model: the checkpoint fixtures -------------------------------------------- */

static gx_model g_model;
static int g_model_ok;

static void tiny_model(void)
{
    if (g_model_ok)
        return;
    gx_config c;
    if (gx_preset("pythia-14m", &c) != GRIT_OK)
        die("preset");
    c.hidden = 16;
    c.layers = 1;
    c.heads = 2;
    c.intermediate = 32;
    c.vocab = 24;
    c.max_positions = 8;
    if (gx_init(&g_model, &c, 1, 1, 1) != GRIT_OK)
        die(grit_errmsg());
    for (size_t i = 0; i < g_model.num_params; i++)
        g_model.params[i] = (float)((int)(i % 13) - 6) / 8;
    g_model_ok = 1;
}

/* A committed checkpoint step_00000005 of the tiny model in g_dir/ckpt. */
static void tiny_checkpoint(void)
{
    static int done;
    if (done)
        return;
    tiny_model();
    char root[1200];
    path_in(root, sizeof root, "ckpt");
    store *s = NULL;
    if (store_open_posix(root, &s) != GRIT_OK)
        die(grit_errmsg());
    ckpt_state st = {.step = 5, .tokens = 80, .next_sample = 10, .loss = 3.5, .threads = 1,
                     .world_size = 1};
    snprintf(st.fingerprint, sizeof st.fingerprint, "0123456789abcdef");
    double bytes_written;
    if (ckpt_save(s, &g_model, g_model.params, g_model.adam_m, g_model.adam_v, &st,
                  &bytes_written) != GRIT_OK)
        die(grit_errmsg());
    store_close(s);
    done = 1;
}

static void ckpt_file_path(char *out, size_t cap, const char *file)
{
    snprintf(out, cap, "%s/ckpt/step_00000005/%s", g_dir, file);
}

static const char *const st_dict[] = {
    "\"F32\"", "\"F16\"", "\"BF16\"", "\"F64\"", "\"I64\"", "\"U8\"", "\"BOOL\"", "\"F8_E4M3\"",
    "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"format\"", "\"pt\"",
    "\"gpt_neox.embed_in.weight\"", "\"embed_out.weight\"", "\"lm_head.weight\"",
    "\"gpt_neox.layers.0.attention.bias\"", "[]", "[0]", "[0,0]", "[1,1,1,1,1,1,1,1,1]",
    "{", "}", "[", "]", ",", ":", "\"", "null", NULL};

/* ---- st_header: safetensors header JSON alone ---------------------------------------- */

static void setup_st_header(void)
{
    /* every seed has 44 bytes of data: 11 F32 or 22 F16/BF16 elements */
    static const char *const dt[] = {"F32", "F16", "BF16"};
    static const uint16_t zero[22];
    for (int k = 0; k < 3; k++) {
        st_entry e[3] = {{"a.weight", dt[k], 2, {k ? 4 : 2, 3}, zero},
                         {"b.bias", dt[k], 1, {k ? 9 : 4}, zero},
                         {"c", dt[k], 0, {0}, zero}};
        char *hdr;
        size_t len;
        if (st_header(e, 3, &hdr, &len) != GRIT_OK)
            die(grit_errmsg());
        add_seed(hdr + 8, len - 8); /* the JSON after the 8-byte length */
        free(hdr);
    }
}

static int run_st_header(const bytes *in, char *why, size_t cap)
{
    /* file size: 8, the header, 44 bytes of data (as in the seeds) */
    st_file f = {0};
    size_t fsize = 8 + in->n + 44;
    grit_err rc = st_parse("fuzz/model.safetensors", (const char *)in->p, in->n, fsize, &f);
    if (rc == GRIT_OK)
        for (int i = 0; i < f.n; i++) { /* what a reader then relies on */
            size_t bytes_needed = st_dtype_size(f.t[i].dtype);
            int wraps = 0;
            for (int d = 0; d < f.t[i].ndim; d++)
                wraps |= __builtin_mul_overflow(bytes_needed, (size_t)f.t[i].shape[d], &bytes_needed);
            if (wraps || bytes_needed != f.t[i].end - f.t[i].begin) {
                snprintf(why, cap, "st_parse accepted tensor '%s' whose shape does not match its "
                                   "%zu bytes", f.t[i].name, f.t[i].end - f.t[i].begin);
                st_file_free(&f);
                return BAD;
            }
            if (f.t[i].end < f.t[i].begin || f.data_off + f.t[i].end > fsize ||
                st_find(&f, f.t[i].name) == NULL) {
                snprintf(why, cap, "st_parse accepted tensor %d with range [%zu, %zu) outside "
                                   "a %zu-byte file", i, f.t[i].begin, f.t[i].end, fsize);
                st_file_free(&f);
                return BAD;
            }
        }
    st_file_free(&f);
    return verdict(rc, "fuzz/model.safetensors", "st_parse", why, cap);
}

/* ---- safetensors: a whole model file, read as a checkpoint -------------------------- */

static void setup_safetensors(void)
{
    tiny_checkpoint();
    char p[1200];
    ckpt_file_path(p, sizeof p, "model.safetensors");
    bytes b = {0};
    if (read_file(p, &b) != 0)
        die("no model.safetensors");
    add_seed(b.p, b.n);
    g_cur->fields[g_cur->nfields++] = 0; /* the header length */
    /* the same model in F16 and BF16 (a reader widens both) */
    for (int k = 0; k < 2; k++) {
        st_entry e[64];
        int n = g_model.num_tensors;
        if (n > 64)
            die("tiny model has too many tensors");
        uint16_t *h = calloc(g_model.num_params, 2);
        for (int i = 0; i < n; i++) {
            const gx_tensor *t = &g_model.tensors[i];
            e[i] = (st_entry){t->name, k ? "BF16" : "F16", t->ndim, {t->shape[0], t->shape[1]},
                              h + t->offset};
        }
        char *hdr;
        size_t len;
        if (st_header(e, n, &hdr, &len) != GRIT_OK)
            die(grit_errmsg());
        bytes f = {0};
        b_set(&f, hdr, len);
        b_insert(&f, f.n, h, g_model.num_params * 2);
        add_seed(f.p, f.n);
        free(f.p);
        free(hdr);
        free(h);
    }
    free(b.p);
}

/* Writes in as file `name` of folder `sub` (made if missing) and loads the model from it. */
static grit_err load_from(const char *sub, const char *name, const bytes *in)
{
    char dir[1200], p[1300];
    path_in(dir, sizeof dir, sub);
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    write_file(p, in->p, in->n);
    store *s = NULL;
    if (store_open_posix(dir, &s) != GRIT_OK)
        die(grit_errmsg());
    grit_errclear();
    grit_err rc = ckpt_load(s, ".", &g_model, NULL, true);
    store_close(s);
    return rc;
}

static int run_safetensors(const bytes *in, char *why, size_t cap)
{
    grit_err rc = load_from("st", "model.safetensors", in);
    return verdict(rc, "model.safetensors", "ckpt_load", why, cap);
}

/* ---- shards: model.safetensors.index.json over two shard files -------------------- */

static void setup_shards(void)
{
    tiny_checkpoint();
    char dir[1200], p[1300];
    path_in(dir, sizeof dir, "shards");
    mkdir(dir, 0755);
    int n = g_model.num_tensors, half = n / 2;
    st_entry e[64];
    if (n > 64)
        die("tiny model has too many tensors");
    bytes j = {0};
    static const char head[] = "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {";
    b_set(&j, head, sizeof head - 1);
    for (int i = 0; i < n; i++) {
        const gx_tensor *t = &g_model.tensors[i];
        e[i] = (st_entry){t->name, "F32", t->ndim, {t->shape[0], t->shape[1]},
                          g_model.params + t->offset};
        char line[256];
        int k = snprintf(line, sizeof line, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                         i ? ", " : "", t->name, i < half ? 1 : 2);
        b_insert(&j, j.n, line, (size_t)k);
    }
    b_insert(&j, j.n, "}}\n", 3);
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    if (st_write(p, e, half) != GRIT_OK)
        die(grit_errmsg());
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    if (st_write(p, e + half, n - half) != GRIT_OK)
        die(grit_errmsg());
    add_seed(j.p, j.n);
    free(j.p);
}

static int run_shards(const bytes *in, char *why, size_t cap)
{
    grit_err rc = load_from("shards", "model.safetensors.index.json", in);
    return verdict(rc, ".safetensors", "ckpt_load (sharded)", why, cap); /* index or shard */
}

/* ---- manifest / state: checkpoint metadata ------------------------------------------ */

/* The tiny checkpoint's file `name` as the one seed. */
static void seed_ckpt_file(const char *name)
{
    tiny_checkpoint();
    char p[1200];
    ckpt_file_path(p, sizeof p, name);
    bytes b = {0};
    if (read_file(p, &b) != 0)
        die(name);
    add_seed(b.p, b.n);
    free(b.p);
}

static void setup_manifest(void) { seed_ckpt_file("manifest.json"); }

static int run_ckpt_file(const char *file, const bytes *in, char *why, size_t cap, int state)
{
    char p[1200], root[1200], keep[1300];
    ckpt_file_path(p, sizeof p, file);
    snprintf(keep, sizeof keep, "%s.orig", p);
    if (access(keep, F_OK) != 0 && rename(p, keep) != 0)
        die("cannot keep the original checkpoint file");
    write_file(p, in->p, in->n);
    path_in(root, sizeof root, "ckpt");
    store *s = NULL;
    if (store_open_posix(root, &s) != GRIT_OK)
        die(grit_errmsg());
    int v;
    if (state) {
        ckpt_state st;
        grit_errclear();
        v = verdict(ckpt_read_state(s, "step_00000005", &st), "trainer_state.json",
                    "ckpt_read_state", why, cap);
    } else {
        char whyv[512] = "", found[256];
        grit_errclear();
        grit_err rc = ckpt_verify(s, "step_00000005", whyv, sizeof whyv);
        if (rc == GRIT_OK)
            v = ACCEPTED;
        else if (!whyv[0]) {
            snprintf(why, cap, "ckpt_verify: error %d with no reason", rc);
            v = BAD;
        } else {
            snprintf(why, cap, "%s", whyv);
            v = REJECTED;
        }
        /* the walk over steps must agree: the only step is found or rejected */
        grit_err fr = ckpt_find(s, found, sizeof found, NULL, NULL);
        if (v != BAD && (fr == GRIT_OK) != (v == ACCEPTED)) {
            snprintf(why, cap, "ckpt_find (%d) disagrees with ckpt_verify (%d)", fr, rc);
            v = BAD;
        }
    }
    store_close(s);
    return v;
}

static int run_manifest(const bytes *in, char *why, size_t cap)
{
    return run_ckpt_file("manifest.json", in, why, cap, 0);
}

static void setup_state(void) { seed_ckpt_file("trainer_state.json"); }

static int run_state(const bytes *in, char *why, size_t cap)
{
    return run_ckpt_file("trainer_state.json", in, why, cap, 1);
}

/* ---- idx: Megatron indexed dataset -------------------------------------------------- */

static bytes g_idx_bin[3]; /* .bin of each seed */

static void setup_idx(void)
{
    static const int dtypes[] = {IDX_DTYPE_U16, IDX_DTYPE_I32, IDX_DTYPE_U8};
    for (int k = 0; k < 3; k++) {
        char prefix[1200], p[1300];
        snprintf(prefix, sizeof prefix, "%s/seed%d", g_dir, k);
        idx_writer *w = NULL;
        if (idx_writer_open(&w, prefix, dtypes[k]) != GRIT_OK)
            die(grit_errmsg());
        uint32_t tok[9];
        for (int s = 0; s < 5; s++) {
            for (int i = 0; i < 9; i++)
                tok[i] = (uint32_t)(s * 31 + i * 7) % 200;
            if (idx_writer_add(w, tok, (size_t)(s % 4 + 1) * 2) != GRIT_OK ||
                (s % 2 && idx_writer_end_doc(w) != GRIT_OK))
                die(grit_errmsg());
        }
        if (idx_writer_end_doc(w) != GRIT_OK || idx_writer_finish(w) != GRIT_OK)
            die(grit_errmsg());
        bytes b = {0};
        snprintf(p, sizeof p, "%s.idx", prefix);
        if (read_file(p, &b) != 0)
            die("no .idx");
        add_seed(b.p, b.n);
        free(b.p);
        snprintf(p, sizeof p, "%s.bin", prefix);
        if (read_file(p, &g_idx_bin[k]) != 0)
            die("no .bin");
    }
    /* version, dtype, N, M, sizes[0], sizes[4], pointers[0], pointers[4], doc_idx[0..] */
    static const size_t f[] = {0, 9, 17, 18, 26, 34, 50, 54, 86, 94, 102, 110};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        g_cur->fields[g_cur->nfields++] = f[i];
}

static int run_idx(const bytes *in, char *why, size_t cap)
{
    char prefix[1200], p[1300];
    path_in(prefix, sizeof prefix, "fz");
    snprintf(p, sizeof p, "%s.idx", prefix);
    write_file(p, in->p, in->n);
    /* the .bin of the seed whose dtype byte the input carries (else the first) */
    int k = in->n > 17 && in->p[17] == IDX_DTYPE_I32 ? 1 : in->n > 17 && in->p[17] == IDX_DTYPE_U8 ? 2 : 0;
    size_t bl = g_idx_bin[k].n;
    if (in->n > 40 && (in->p[40] & 7) == 7 && bl) /* now and then a truncated .bin */
        bl -= 1 + in->p[41] % bl;
    snprintf(p, sizeof p, "%s.bin", prefix);
    write_file(p, g_idx_bin[k].p, bl);
    idx_reader *r = NULL;
    grit_errclear();
    grit_err rc = idx_open(&r, prefix);
    if (rc == GRIT_OK) {
        /* everything the reader claims must be readable */
        size_t ns = idx_num_seqs(r), nd = idx_num_docs(r), total = 0;
        for (size_t i = 0; i <= nd; i++)
            if (idx_doc_start(r, i) > ns) {
                snprintf(why, cap, "idx_open accepted doc_idx[%zu] = %zu > %zu sequences", i,
                         idx_doc_start(r, i), ns);
                idx_close(r);
                return BAD;
            }
        uint32_t *buf = NULL;
        for (size_t i = 0; i < ns && rc == GRIT_OK; i++) {
            size_t n = idx_seq_len(r, i);
            total += n;
            if (!(buf = realloc(buf, (n + 1) * sizeof *buf)))
                die("out of memory");
            rc = idx_read(r, i, 0, n, buf);
        }
        free(buf);
        if (rc == GRIT_OK && total != idx_num_tokens(r)) {
            snprintf(why, cap, "idx: sequence lengths add up to %zu, idx_num_tokens says %zu",
                     total, idx_num_tokens(r));
            rc = GRIT_EFORMAT;
            idx_close(r);
            return BAD;
        }
        idx_close(r);
        if (rc != GRIT_OK) {
            snprintf(why, cap, "idx_read failed on a dataset idx_open accepted: %s", grit_errmsg());
            return BAD;
        }
    }
    return verdict(rc, prefix, "idx_open", why, cap);
}

/* ---- tokenizer: tokenizer.json ------------------------------------------------------ */

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the others
 * map to U+0100 upwards. Writes the UTF-8 of byte b's character. */
static size_t byte_char(int b, char *out)
{
    int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    unsigned cp;
    if (printable)
        cp = (unsigned)b;
    else {
        int k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || x >= 0xae))
                k++;
        cp = 256 + (unsigned)k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static void json_token(bytes *b, const char *s, size_t n)
{
    b_insert(b, b->n, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            b_insert(b, b->n, "\\", 1);
        b_insert(b, b->n, s + i, 1);
    }
    b_insert(b, b->n, "\"", 1);
}

static void setup_tokenizer(void)
{
    /* byte level (the fast path): 256 byte tokens, a few merges, one special token */
    bytes b = {0};
    const char *head =
        "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
        " \"added_tokens\": [{\"id\": 262, \"content\": \"<|endoftext|>\", \"single_word\": false,"
        " \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}],\n"
        " \"normalizer\": null,\n"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
        "\"trim_offsets\": true, \"use_regex\": true},\n"
        " \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
        "\"trim_offsets\": false, \"use_regex\": true},\n"
        " \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
        "\"trim_offsets\": true, \"use_regex\": true},\n"
        " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
        "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false,"
        " \"byte_fallback\": false, \"vocab\": {";
    b_set(&b, head, strlen(head));
    char c[4], num[32];
    for (int i = 0; i < 256; i++) {
        size_t n = byte_char(i, c);
        json_token(&b, c, n);
        int k = snprintf(num, sizeof num, ": %d, ", i);
        b_insert(&b, b.n, num, (size_t)k);
    }
    /* merges: "Ġ t" (U+0120 is byte 0x20), "h e", "l l", "he ll", "Ġt he" */
    const char *tail = "\"\xc4\xa0t\": 256, \"he\": 257, \"ll\": 258, \"hell\": 259, "
                       "\"\xc4\xa0the\": 260, \"hello\": 261, \"<|endoftext|>\": 262},\n"
                       " \"merges\": [\"\xc4\xa0 t\", \"h e\", \"l l\", \"he ll\", "
                       "\"\xc4\xa0t he\", \"hell o\"]}}\n";
    b_insert(&b, b.n, tail, strlen(tail));
    add_seed(b.p, b.n);
    free(b.p);
    /* generic: Split regex + ByteLevel without regex, NFKC, a template, byte fallback */
    add_seed_str(
        "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 5, \"content\": \"<s>\", "
        "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
        "\"special\": true}, {\"id\": 6, \"content\": \"</s>\", \"single_word\": false, "
        "\"lstrip\": true, \"rstrip\": true, \"normalized\": false, \"special\": true}],\n"
        " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"}, "
        "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"a\"}]},\n"
        " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [\n"
        "   {\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p{L}+|\\\\s+|\\\\d{1,3}\"}, "
        "\"behavior\": \"Isolated\", \"invert\": false},\n"
        "   {\"type\": \"Digits\", \"individual_digits\": true},\n"
        "   {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},\n"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
        "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
        "\"pair\": [], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [5], "
        "\"tokens\": [\"<s>\"]}}},\n"
        " \"decoder\": {\"type\": \"ByteLevel\"},\n"
        " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"ba\": 3, "
        "\"aba\": 4, \"<s>\": 5, \"</s>\": 6}, \"merges\": [\"a b\", \"b a\", \"ab a\"]}}\n");
    add_seed_str(
        "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null,\n"
        " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", "
        "\"prepend_scheme\": \"first\", \"split\": false},\n"
        " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", "
        "\"pattern\": {\"String\": \"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": "
        "\"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"content\": \" \", "
        "\"start\": 1, \"stop\": 0}]},\n"
        " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, "
        "\"fuse_unk\": true, \"vocab\": {\"<unk>\": 0, \"<0x41>\": 1, \"<0xE2>\": 2, \"a\": 3, "
        "\"\xe2\x96\x81\": 4, \"\xe2\x96\x81" "a\": 5, \"b\": 6}, \"merges\": [[\"\xe2\x96\x81\", "
        "\"a\"]]}}\n");
}

static int run_tokenizer(const bytes *in, char *why, size_t cap)
{
    char p[1200];
    path_in(p, sizeof p, "tokenizer.json");
    write_file(p, in->p, in->n);
    bpe *t = NULL;
    grit_errclear();
    /* the byte-level seed also through the generic path, by the input's length */
    grit_err rc = bpe_open_file(&t, p, in->n % 3 == 0 ? BPE_OPEN_GENERIC : 0);
    if (rc != GRIT_OK)
        return verdict(rc, p, "bpe_open_file", why, cap);
    static const char text[] = "hello the world <|endoftext|> aba ab\xe2\x96\x81 12345 <s></s>"
                               " \xff\xc0\xaf \xe2\x82 caf\xc3\xa9 \xf0\x9f\x98\x80\t\n  end";
    bpe_ctx *c = NULL;
    bpe_ids ids = {0};
    int v = ACCEPTED;
    if ((rc = bpe_ctx_open(&c, t)) != GRIT_OK ||
        (rc = bpe_encode(c, text, sizeof text - 1, BPE_ALLOW_SPECIAL | BPE_ADD_SPECIAL, &ids)) !=
            GRIT_OK) {
        /* a tokenizer that loads must encode (or say why, e.g. no byte for a character) */
        v = verdict(rc, NULL, "bpe_encode", why, cap);
    } else {
        size_t vs = bpe_vocab_size(t);
        for (size_t i = 0; i < ids.n; i++)
            if (ids.v[i] >= vs) {
                snprintf(why, cap, "bpe_encode gave id %u, vocabulary size %zu", ids.v[i], vs);
                v = BAD;
                break;
            }
        char out[4096];
        size_t ol = 0;
        if (v == ACCEPTED && (rc = bpe_decode(t, ids.v, ids.n, out, sizeof out, &ol)) != GRIT_OK)
            v = verdict(rc, NULL, "bpe_decode", why, cap);
    }
    bpe_ids_free(&ids);
    bpe_ctx_close(c);
    bpe_close(t);
    return v;
}

/* ---- warc: WARC records, plain and gzip'ed ------------------------------------------ */

static void warc_record(bytes *b, const char *type, const char *uri, const char *block)
{
    char h[1024];
    int n = snprintf(h, sizeof h,
                     "WARC/1.0\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:1>\r\n"
                     "WARC-Date: 2024-01-01T00:00:00Z\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                     type, uri ? "WARC-Target-URI: " : "", uri ? uri : "", uri ? "\r\n" : "",
                     strlen(block));
    b_insert(b, b->n, h, (size_t)n);
    b_insert(b, b->n, block, strlen(block));
    b_insert(b, b->n, "\r\n\r\n", 4);
}

static void setup_warc(void)
{
    static const char page[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nX-A: b\r\n\r\n"
        "<html><head><title>T</title></head><body><p>Hello there, a page of words.</p>"
        "<ul><li>one</li><li>two</li></ul></body></html>";
    bytes b = {0};
    warc_record(&b, "warcinfo", NULL, "software: grit-fuzz\r\nformat: WARC File Format 1.0\r\n");
    warc_record(&b, "request", "http://example.com/", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n");
    warc_record(&b, "response", "http://example.com/", page);
    warc_record(&b, "response", "<http://example.com/img>",
                "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n\x89PNG....");
    warc_record(&b, "response", "http://example.com/raw", "HTTP/1.0 200 OK\r\n\r\n<p>no type</p>");
    warc_record(&b, "metadata", "http://example.com/", "fetchTimeMs: 1\r\n");
    add_seed(b.p, b.n);
    /* gzip'ed, one member per record (as crawlers write them) */
    bytes z = {0}, r = {0};
    const char *recs[] = {"response", "revisit"};
    for (int i = 0; i < 2; i++) {
        r.n = 0;
        warc_record(&r, recs[i], "http://example.org/a", page);
        uLong bound = compressBound((uLong)r.n) + 64;
        uint8_t *out = malloc(bound);
        z_stream s = {0};
        if (deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            die("zlib");
        s.next_in = r.p;
        s.avail_in = (uInt)r.n;
        s.next_out = out;
        s.avail_out = (uInt)bound;
        if (deflate(&s, Z_FINISH) != Z_STREAM_END)
            die("zlib");
        b_insert(&z, z.n, out, s.total_out);
        deflateEnd(&s);
        free(out);
    }
    add_seed(z.p, z.n);
    free(z.p);
    free(r.p);
    free(b.p);
}

static int run_warc(const bytes *in, char *why, size_t cap)
{
    char p[1200];
    path_in(p, sizeof p, "fuzz.warc");
    if (in->n % 4 == 1) { /* every fourth input gzip'ed whole: valid zlib, broken WARC */
        gzFile z = gzopen(p, "wb");
        if (!z || (in->n && gzwrite(z, in->p, (unsigned)in->n) != (int)in->n) || gzclose(z) != Z_OK)
            die("cannot write the gzip'ed WARC");
    } else
        write_file(p, in->p, in->n);
    prep_reader *r = NULL;
    grit_errclear();
    grit_err rc = prep_reader_open(&r, p, PREP_FMT_WARC, NULL);
    if (rc != GRIT_OK)
        return verdict(rc, p, "prep_reader_open", why, cap);
    prep_doc d;
    int k, docs = 0;
    while ((k = prep_reader_next(r, &d)) == 1) {
        docs++;
        /* a document's bytes must be readable (ASan checks the range) */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < d.len; i++)
            sum ^= (uint8_t)d.body[i];
        for (size_t i = 0; i < d.url_len; i++)
            sum ^= (uint8_t)d.url[i];
        (void)sum;
    }
    prep_reader_close(r);
    return k < 0 ? verdict((grit_err)k, p, "prep_reader_next", why, cap) : ACCEPTED;
}

/* ---- html: text extraction ---------------------------------------------------------- */

static const char *const html_dict[] = {
    "<div>", "</div>", "<p>", "</p>", "<table>", "<tr>", "<td>", "</table>", "<li>", "<ul>",
    "<ol>", "<dl><dt>", "<dd>", "<b>", "<i>", "<a href=x>", "</a>", "<nobr>", "<font>",
    "<script>", "</script>", "<style>", "<textarea>", "<title>", "<template>", "<svg>",
    "<math>", "<select>", "<option>", "<frameset>", "<plaintext>", "<xmp>", "<noscript>",
    "<!--", "-->", "<![CDATA[", "]]>", "<!DOCTYPE html>", "<?xml ?>", "&amp;", "&#0;",
    "&#x110000;", "&nbsp", "<br/>", "<img src=x>", "<pre>", "<h1>", "<nav class=menu>",
    "<div hidden>", "<div aria-hidden=\"true\">", "<p class=\"footer\">", "<", ">", "/", "=",
    "\"", "'", NULL};
static const char *const html_nest[] = {"<div>", "<b>", "<table><tr><td>", "<ul><li>",
                                        "<a>", "<p><i>", "<dl><dd>", "<span>", "<svg><g>",
                                        "<select><option>", "<tr>", "<li>", "<td>", NULL};

static void setup_html(void)
{
    add_seed_str(
        "<!DOCTYPE html><html><head><title>A page</title><style>p{}</style>"
        "<script>var x = '<p>';</script></head><body>"
        "<nav class=\"navbar\"><a href=\"/\">Home</a> <a href=\"/a\">A</a></nav>"
        "<h1>Heading &amp; more</h1><p>The first paragraph has <b>bold</b> and <i>italic</i>"
        " words in it.</p><div><p>Nested <span>text</span> with a <a href=\"x\">link</a>.</p>"
        "<ul><li>one<li>two</ul><table><tr><td>cell<td>cell 2</table><pre>  code\n  more</pre>"
        "<dl><dt>term<dd>definition</dl></div><footer>(c) 2024</footer></body></html>");
    add_seed_str("<p>caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 &eacute; &#233; &#x1F600;</p>"
                 "<div aria-hidden=\"true\">hidden</div><p hidden>gone</p>"
                 "<textarea><p>not a tag</textarea><!-- <p>comment</p> -->"
                 "<svg><p>in svg</p></svg><math><mi>x</mi></math>text after");
    add_seed_str("<table><tr><td><table><tr><td>deep</td></tr></table></td></tr></table>"
                 "<b><i></b></i><p><div>misnested</p></div><select><option>o</select>");
}

static int run_html(const bytes *in, char *why, size_t cap)
{
    prep_buf out = {0};
    extract_opts o = {.max_link_density = 0.5};
    grit_err rc = extract_html((const char *)in->p, in->n, &o, &out);
    int v = ACCEPTED;
    if (rc != GRIT_OK) {
        snprintf(why, cap, "extract_html: error %d on an input of %zu bytes (only ENOMEM is "
                           "allowed)", rc, in->n);
        v = rc == GRIT_ENOMEM ? REJECTED : BAD;
    } else if (strlen(out.p) != out.len) {
        snprintf(why, cap, "extract_html: text of %zu bytes has a NUL at %zu", out.len,
                 strlen(out.p));
        v = BAD;
    } else if (extract_refusal((const char *)in->p, in->n, &o)) {
        v = out.len ? BAD : REJECTED;
        snprintf(why, cap, "%s%s", extract_refusal((const char *)in->p, in->n, &o),
                 out.len ? ": refused, yet text came out" : "");
    }
    prep_buf_free(&out);
    return v;
}

static target g_targets[] = {
    {"config", setup_config, run_config, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"prepcfg", setup_prepcfg, run_prepcfg, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"hfconfig", setup_hfconfig, run_hfconfig, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"st_header", setup_st_header, run_st_header, st_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"safetensors", setup_safetensors, run_safetensors, st_dict, json_nest, 1, 0, {{0}}, 0, {0}, 0},
    {"shards", setup_shards, run_shards, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"manifest", setup_manifest, run_manifest, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"state", setup_state, run_state, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"idx", setup_idx, run_idx, NULL, NULL, 1, 0, {{0}}, 0, {0}, 0},
    {"tokenizer", setup_tokenizer, run_tokenizer, json_dict, json_nest, 0, 1, {{0}}, 0, {0}, 0},
    {"warc", setup_warc, run_warc, NULL, NULL, 0, 0, {{0}}, 0, {0}, 0},
    {"html", setup_html, run_html, html_dict, html_nest, 0, 0, {{0}}, 0, {0}, 0},
};
#define NTARGETS (int)(sizeof g_targets / sizeof g_targets[0])

/* --- mutations ---------------------------------------------------------------------- */

static const char *const num_edges[] = {
    "0", "-1", "1", "-0", "2", "7", "8", "255", "256", "65535", "65536", "2147483647",
    "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "18446744073709551615", "18446744073709551616",
    "99999999999999999999999999999999", "1e308", "1e309", "-1e309", "1e-400", "NaN",
    "Infinity", "-Infinity", "0.5", "1.0e+2", "0x10", "00", "1e", "-", ".", "+1", NULL};

static const char *const utf8_bad[] = {
    "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xf8\x88\x80\x80\x80",
    "\xfc\x84\x80\x80\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\x80",
    "\xbf", "\xe2\x82", "\xf0\x9f\x98", "\xfe", "\xff", "\xef\xbb\xbf", "\xc3", "\\u0000",
    "\\ud800", "\\udfff\\ud800", "\\u", "\\x41", "\x00", "\r", "\r\n\r\n", NULL};

static const uint64_t int_edges[] = {
    0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000ull,
    0xffffffffull, 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
    0xffffffffffffffffull, 0xfffffffffffffff0ull, 0x4000000000000000ull, 1000, 4096,
    1u << 20, 100u << 20};

static size_t count_list(const char *const *l)
{
    size_t n = 0;
    while (l && l[n])
        n++;
    return n;
}

/* A position next to a structural byte (where truncation and inserts are interesting). */
static size_t interesting_pos(uint64_t *s, const bytes *b)
{
    if (!b->n)
        return 0;
    for (int tries = 0; tries < 32; tries++) {
        size_t i = below(s, b->n);
        if (strchr("{}[]\":,<>\r\n =;/", b->p[i]) && b->p[i])
            return i + below(s, 2);
    }
    return below(s, b->n + 1);
}

/* Replaces one run of ASCII digits (with a leading '-') by an edge value. */
static void mut_number(uint64_t *s, bytes *b)
{
    size_t starts[256], n = 0;
    for (size_t i = 0; i < b->n && n < 256; i++)
        if (b->p[i] >= '0' && b->p[i] <= '9' && (i == 0 || !(b->p[i - 1] >= '0' && b->p[i - 1] <= '9')))
            starts[n++] = i;
    if (!n)
        return;
    size_t a = starts[below(s, n)], e = a;
    while (e < b->n && ((b->p[e] >= '0' && b->p[e] <= '9') || b->p[e] == '.' || b->p[e] == 'e'))
        e++;
    if (a > 0 && b->p[a - 1] == '-')
        a--;
    const char *v = num_edges[below(s, count_list(num_edges))];
    char big[64];
    if (below(s, 6) == 0) { /* the file's own size and around it */
        snprintf(big, sizeof big, "%zu", b->n + below(s, 3) - 1);
        v = big;
    }
    b_erase(b, a, e - a);
    b_insert(b, a, v, strlen(v));
}

/* Overwrites a 1/2/4/8-byte little-endian integer at a field offset (or anywhere). */
static void mut_int(uint64_t *s, bytes *b, const target *t)
{
    if (!b->n)
        return;
    size_t off = t->nfields && below(s, 4) ? t->fields[below(s, (size_t)t->nfields)] : below(s, b->n);
    static const int widths[] = {1, 2, 4, 8};
    int w = widths[below(s, 4)];
    if (t->binary && off + 8 <= b->n && below(s, 2))
        w = 8;
    uint64_t v = below(s, 5) == 0 ? (uint64_t)b->n + below(s, 65) - 32
                                  : int_edges[below(s, sizeof int_edges / sizeof int_edges[0])];
    if (below(s, 4) == 0)
        v = rnd(s);
    for (int i = 0; i < w && off + (size_t)i < b->n; i++)
        b->p[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static void mut_dict(uint64_t *s, bytes *b, const char *const *dict)
{
    size_t n = count_list(dict);
    if (!n)
        return;
    const char *tok = dict[below(s, n)];
    if (below(s, 2) && b->n) { /* replace a quoted string (or a tag) with the token */
        size_t at = below(s, b->n);
        char open = below(s, 2) ? '"' : '<', close = open == '"' ? '"' : '>';
        while (at < b->n && b->p[at] != (uint8_t)open)
            at++;
        size_t e = at + 1;
        while (e < b->n && b->p[e] != (uint8_t)close)
            e++;
        if (e < b->n) {
            b_erase(b, at, e + 1 - at);
            b_insert(b, at, tok, strlen(tok));
            return;
        }
    }
    b_insert(b, interesting_pos(s, b), tok, strlen(tok));
}

/* Deep nesting: an opener repeated 100 to 100,000 times at one place. */
static void mut_nest(uint64_t *s, bytes *b, const char *const *nest)
{
    size_t n = count_list(nest);
    if (!n)
        return;
    static const size_t depths[] = {100, 600, 1001, 2049, 5000, 20000, 100000};
    const char *o = nest[below(s, n)];
    size_t d = depths[below(s, sizeof depths / sizeof depths[0])], ol = strlen(o);
    if (d * ol > FUZZ_MAX_INPUT / 2)
        d = FUZZ_MAX_INPUT / 2 / ol;
    bytes r = {0};
    b_reserve(&r, d * ol);
    for (size_t i = 0; i < d; i++)
        memcpy(r.p + i * ol, o, ol);
    r.n = d * ol;
    b_insert(b, interesting_pos(s, b), r.p, r.n);
    free(r.p);
}

/* A value of the parsed JSON, picked by a walk that stops at each node with some chance. */
static json_t *pick_node(uint64_t *s, json_t *root, json_t **parent, const char **key, size_t *idx)
{
    json_t *cur = root;
    *parent = NULL;
    for (int depth = 0; depth < 64; depth++) {
        size_t n = json_is_object(cur) ? json_object_size(cur) : json_is_array(cur) ? json_array_size(cur) : 0;
        if (!n || (depth && below(s, 3) == 0))
            return cur;
        size_t i = below(s, n);
        *parent = cur;
        if (json_is_array(cur)) {
            *idx = i;
            *key = NULL;
            cur = json_array_get(cur, i);
        } else {
            void *it = json_object_iter(cur);
            while (i-- && it)
                it = json_object_iter_next(cur, it);
            *key = json_object_iter_key(it);
            cur = json_object_iter_value(it);
        }
    }
    return cur;
}

/* Value-level edits: a number to an edge value, a value to another type, a key removed,
 * renamed or added, an array grown or emptied. Returns 0 when b is not JSON. */
static int mutate_json(uint64_t *s, bytes *b, const target *t)
{
    json_t *root = json_loadb((const char *)b->p, b->n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!root)
        return 0;
    for (int m = 1 + (int)below(s, 3); m > 0; m--) {
        json_t *parent, *x;
        const char *key = NULL;
        size_t idx = 0;
        x = pick_node(s, root, &parent, &key, &idx);
        json_t *nv = NULL;
        switch (below(s, 9)) {
        case 0:
        case 1: { /* a number edge value, as a number where jansson can hold it */
            const char *e = num_edges[below(s, count_list(num_edges))];
            char *end;
            errno = 0;
            long long ll = strtoll(e, &end, 10);
            if (!*end && !errno)
                nv = json_integer(ll);
            else {
                double d = strtod(e, &end);
                nv = !*end && d == d && d - d == 0 ? json_real(d) : json_string(e);
            }
            break;
        }
        case 2: { /* another type */
            static const char *const kinds[] = {"null", "true", "false", "\"\"", "[]", "{}",
                                                "\"x\"", "0", "-1", "[1]", "{\"a\":1}", "1.5"};
            nv = json_loads(kinds[below(s, 12)], JSON_DECODE_ANY, NULL);
            break;
        }
        case 3: /* a dictionary token as a string */
            if (t->dict && count_list(t->dict)) {
                const char *d = t->dict[below(s, count_list(t->dict))];
                nv = json_loads(d, JSON_DECODE_ANY, NULL);
                if (!nv)
                    nv = json_string(d);
            }
            break;
        case 4: /* remove it */
            if (parent && key)
                json_object_del(parent, key);
            else if (parent)
                json_array_remove(parent, idx);
            break;
        case 5: /* a copy of another value of the document in its place */
        {
            json_t *p2;
            const char *k2;
            size_t i2;
            nv = json_deep_copy(pick_node(s, root, &p2, &k2, &i2));
            break;
        }
        case 6: /* an unknown key, or a known one from another place */
            if (json_is_object(x)) {
                json_t *p2;
                const char *k2 = NULL;
                size_t i2;
                pick_node(s, root, &p2, &k2, &i2);
                json_object_set_new(x, k2 && below(s, 2) ? k2 : "fuzz_unknown", json_integer(1));
            }
            break;
        case 7: /* an array grown (many copies of an element) or emptied */
            if (json_is_array(x) && json_array_size(x)) {
                if (below(s, 3) == 0)
                    json_array_clear(x);
                else
                    for (size_t k = below(s, 2) ? 1 + below(s, 4) : 100 + below(s, 5000); k > 0; k--)
                        json_array_append(x, json_array_get(x, below(s, json_array_size(x))));
            }
            break;
        case 8: /* a string made long, empty, or with bad bytes */
            if (json_is_string(x)) {
                static const char *const strs[] = {"", " ", "\xc3\xa9", "a\x00b", "../../etc/passwd",
                                                   "s3://", "-", "%s%n", "\xe2\x96\x81"};
                size_t k = below(s, 10);
                if (k < 9)
                    nv = json_stringn(strs[k], k == 3 ? 3 : strlen(strs[k]));
                else {
                    char *big = malloc(70000);
                    memset(big, 'a', 69999);
                    big[69999] = 0;
                    nv = json_string(big);
                    free(big);
                }
            }
            break;
        }
        if (nv) {
            if (!parent) {
                json_decref(root);
                root = nv;
            } else if (key)
                json_object_set_new(parent, key, nv);
            else
                json_array_set_new(parent, idx, nv);
        }
    }
    char *out = json_dumps(root, JSON_ENCODE_ANY | (below(s, 2) ? JSON_INDENT(1) : JSON_COMPACT));
    json_decref(root);
    if (!out)
        return 0;
    b_set(b, out, strlen(out));
    free(out);
    return 1;
}

static void mutate_once(uint64_t *s, bytes *b, const target *t)
{
    size_t n = b->n;
    switch (below(s, 14)) {
    case 0: /* bit flips */
        for (int k = 1 + (int)below(s, 8); k > 0 && n; k--)
            b->p[below(s, n)] ^= (uint8_t)(1u << below(s, 8));
        break;
    case 1: { /* byte set */
        static const uint8_t v[] = {0, 0xff, 0x7f, 0x80, '"', '{', '}', '[', ']', '<', '>', '\\',
                                    '\r', '\n', ' ', ':', ',', '0', '9', '-'};
        if (n)
            b->p[below(s, n)] = below(s, 2) ? v[below(s, sizeof v)] : (uint8_t)rnd(s);
        break;
    }
    case 2: { /* insert random bytes */
        uint8_t r[16];
        size_t k = 1 + below(s, sizeof r);
        for (size_t i = 0; i < k && i < sizeof r; i++) /* the bound for gcc -march=znver5 */
            r[i] = (uint8_t)rnd(s);
        b_insert(b, below(s, n + 1), r, k);
        break;
    }
    case 3: /* delete a range */
        b_erase(b, below(s, n + 1), 1 + below(s, below(s, 2) ? 8 : 256));
        break;
    case 4: /* truncate: at a structural byte or anywhere */
        b->n = below(s, 2) ? interesting_pos(s, b) : below(s, n + 1);
        if (b->n > n)
            b->n = n;
        if (b->cap)
            b->p[b->n] = 0;
        break;
    case 5: { /* duplicate a chunk */
        if (!n)
            break;
        size_t a = below(s, n), len = 1 + below(s, n - a < 512 ? n - a : 512);
        uint8_t *c = malloc(len);
        memcpy(c, b->p + a, len);
        for (int k = below(s, 4) ? 1 : (int)(2 + below(s, 64)); k > 0; k--)
            if (b->n + len <= FUZZ_MAX_INPUT)
                b_insert(b, below(s, b->n + 1), c, len);
        free(c);
        break;
    }
    case 6: { /* splice a chunk of another seed */
        const bytes *o = &t->seeds[below(s, (size_t)t->nseeds)];
        if (!o->n)
            break;
        size_t a = below(s, o->n), len = 1 + below(s, o->n - a);
        if (below(s, 2)) { /* replace the tail */
            b->n = below(s, n + 1);
            b_insert(b, b->n, o->p + a, len);
        } else
            b_insert(b, below(s, n + 1), o->p + a, len);
        break;
    }
    case 7:
    case 8:
        mut_number(s, b);
        break;
    case 9:
        mut_int(s, b, t);
        break;
    case 10:
    case 11:
        mut_dict(s, b, t->dict);
        break;
    case 12:
        if (below(s, 3) == 0)
            mut_nest(s, b, t->nest);
        else
            mut_number(s, b);
        break;
    case 13: { /* invalid, overlong or escaped UTF-8 */
        const char *u = utf8_bad[below(s, count_list(utf8_bad))];
        size_t ul = strlen(u) ? strlen(u) : 1; /* "\x00" is one NUL byte */
        size_t at = below(s, n + 1);
        if (below(s, 2) && n) { /* inside a string where there is one */
            for (size_t i = at; i < n; i++)
                if (b->p[i] == '"' || b->p[i] == '>') {
                    at = i + 1;
                    break;
                }
        }
        b_insert(b, at, u, ul);
        break;
    }
    }
    if (b->n > FUZZ_MAX_INPUT)
        b->n = FUZZ_MAX_INPUT;
    b_reserve(b, b->n);
    b->p[b->n] = 0;
}

/* Case k of target t under seed: which seed input, how many mutations, which. */
static void make_case(const target *t, uint64_t seed, uint64_t k, bytes *out)
{
    uint64_t s = seed ^ fnv(t->name) ^ (k * 0xd1342543de82ef95ull);
    rnd(&s);
    const bytes *base = &t->seeds[below(&s, (size_t)t->nseeds)];
    b_set(out, base->p, base->n);
    if (k < (uint64_t)t->nseeds) { /* the first cases are the seeds themselves */
        b_set(out, t->seeds[k].p, t->seeds[k].n);
        return;
    }
    /* JSON targets: half the cases edit values of the parsed document (it stays JSON, so
     * the checks behind the parser run), some of them with byte mutations on top */
    if (t->json && below(&s, 2) && mutate_json(&s, out, t) && below(&s, 3))
        return;
    int m = 1 + (int)below(&s, 4);
    if (below(&s, 8) == 0)
        m += 4 + (int)below(&s, 12);
    for (int i = 0; i < m; i++)
        mutate_once(&s, out, t);
}

/* --- running ------------------------------------------------------------------------ */

static char g_where[10000];     /* "target T case K" of the input being run (for crashes) */
static uint64_t g_seed = 1;
static unsigned g_timeout = 20;

static void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rm_tree(p);
        }
        closedir(d);
        rmdir(path);
    } else
        unlink(path);
}

static int g_own_dir;
static void cleanup(void)
{
    if (g_own_dir && g_dir[0])
        rm_tree(g_dir);
}

static void say_where(void)
{
    if (g_where[0]) {
        ssize_t w = write(2, g_where, strlen(g_where));
        (void)w;
    }
}

/* A sanitizer report or a fatal signal: say where, remove the scratch directory. */
static void on_death(void)
{
    say_where();
    cleanup();
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "\ngrit-fuzz: TIMEOUT: an input ran past the watchdog\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    on_death();
    _exit(124);
}

static void on_fatal(int sig)
{
    static const char m[] = "\ngrit-fuzz: CRASH (fatal signal)\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    on_death();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Each sanitizer runtime (libasan, libubsan) keeps its own death callback: set it in all. */
static int set_death_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "san.so"))
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return 0;
    void (*set)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(h, "__sanitizer_set_death_callback");
    if (set)
        set((void (*)(void))arg);
    dlclose(h);
    return 0;
}

static void set_where(const target *t, const char *label, uint64_t k, const char *file)
{
    if (file)
        snprintf(g_where, sizeof g_where, "grit-fuzz: in target %s, input %s\n  replay: grit-fuzz "
                 "--target %s --file %s\n", t->name, file, t->name, file);
    else
        snprintf(g_where, sizeof g_where, "grit-fuzz: in target %s, %s %llu\n  replay: grit-fuzz "
                 "--seed %llu --target %s --case %llu [--write FILE]\n", t->name, label,
                 (unsigned long long)k, (unsigned long long)g_seed, t->name,
                 (unsigned long long)k);
}

typedef struct tally {
    uint64_t run, accepted, rejected, bad, leaks;
    double slowest;      /* seconds of the slowest input, to spot super-linear cases */
    char slowest_at[64]; /* which one */
} tally;

static double now(void);
static uint64_t g_case;

/* LeakSanitizer: checked after every input with --leak-each (and for regression inputs),
 * else after every LEAK_BATCH inputs; a leak found in a batch is pinned to its input by a
 * fresh process that replays the batch with --leak-each (a leak is reported again at every
 * later check in this one). */
#define LEAK_BATCH 64
static int g_leak_each;
static int g_leaked; /* a leak was found: later checks would report it again, so stop checking */
static const char *g_argv0;

/* Runs one input; returns 0 when clean. */
static int run_one(const target *t, const bytes *in, tally *ty, int verbose)
{
    char why[2048] = "";
    alarm(g_timeout);
    grit_errclear();
    double t0 = now();
    int v = t->run(in, why, sizeof why);
    double dt = now() - t0;
    alarm(0);
    ty->run++;
    if (dt > ty->slowest) {
        ty->slowest = dt;
        snprintf(ty->slowest_at, sizeof ty->slowest_at, "case %llu, %zu bytes",
                 (unsigned long long)g_case, in->n);
    }
    int leaked = 0;
    if (!g_leaked && g_leak_each && __lsan_do_recoverable_leak_check &&
        __lsan_do_recoverable_leak_check()) {
        leaked = g_leaked = 1;
        ty->leaks++;
    }
    if (v == ACCEPTED)
        ty->accepted++;
    else if (v == REJECTED)
        ty->rejected++;
    else
        ty->bad++;
    if (v == BAD || leaked || verbose) {
        if (v == BAD || leaked)
            fprintf(stderr, "grit-fuzz: FAIL: %s%s\n", leaked ? "leak (LeakSanitizer report above); " : "",
                    v == BAD ? why : "");
        else
            printf("%s (%zu bytes): %s%s\n", v == ACCEPTED ? "accepted" : "rejected", in->n,
                   why[0] ? "" : "", why);
        if (v == BAD || leaked)
            say_where();
    }
    return v == BAD || leaked;
}

/* Replays cases a..b of t in a fresh process, checking for leaks after each. */
static void pin_leak(const target *t, uint64_t a, uint64_t b)
{
    char seed[32], first[32], n[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)g_seed);
    snprintf(first, sizeof first, "%llu", (unsigned long long)a);
    snprintf(n, sizeof n, "%llu", (unsigned long long)(b - a + 1));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {(char *)g_argv0, "--seed", seed, "--target", (char *)t->name, "--first",
                        first, "--cases", n, "--leak-each", NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int st;
    if (pid > 0)
        waitpid(pid, &st, 0);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Inputs in tests/fuzz/regress/<target>/, in name order. */
static int run_regressions(const target *t, tally *ty)
{
    char d[2048];
    snprintf(d, sizeof d, "%s/tests/fuzz/regress/%s", GRIT_FUZZ_SRC, t->name);
    DIR *dp = opendir(d);
    if (!dp)
        return 0;
    char *names[1024];
    int n = 0, fails = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < 1024)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(dp);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    bytes b = {0};
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        if (read_file(p, &b) == 0) {
            set_where(t, NULL, 0, p);
            fails += run_one(t, &b, ty, 0);
        }
        free(names[i]);
    }
    free(b.p);
    return fails;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: grit-fuzz [--seconds S] [--seed N] [--target T[,T...]] [--case K]\n"
               "                 [--cases N] [--file F] [--write F] [--timeout S] [--dir D]\n"
               "                 [--first K] [--leak-each] [--list]\n"
               "  --seconds S   whole run, split over the targets (default GRIT_FUZZ_SECONDS or 60)\n"
               "  --case K      replay case K only (prints the verdict; --write saves the input)\n"
               "  --file F      run the file F as the input of --target\n");
}

int main(int argc, char **argv)
{
    double seconds = 60;
    const char *env = getenv("GRIT_FUZZ_SECONDS");
    if (env && *env)
        seconds = atof(env);
    const char *only = NULL, *file = NULL, *write_to = NULL, *dir = NULL;
    long long one_case = -1, ncases = -1, first = 0;
    g_argv0 = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list")) {
            for (int k = 0; k < NTARGETS; k++)
                printf("%s\n", g_targets[k].name);
            return 0;
        } else if (!strcmp(a, "--leak-each"))
            g_leak_each = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            usage(stderr);
            return 2;
        } else if (!strcmp(a, "--seconds"))
            seconds = atof(argv[++i]);
        else if (!strcmp(a, "--seed"))
            g_seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--target"))
            only = argv[++i];
        else if (!strcmp(a, "--case"))
            one_case = atoll(argv[++i]);
        else if (!strcmp(a, "--first"))
            first = atoll(argv[++i]);
        else if (!strcmp(a, "--cases"))
            ncases = atoll(argv[++i]);
        else if (!strcmp(a, "--file"))
            file = argv[++i];
        else if (!strcmp(a, "--write"))
            write_to = argv[++i];
        else if (!strcmp(a, "--timeout"))
            g_timeout = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--dir"))
            dir = argv[++i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if ((one_case >= 0 || file) && (!only || strchr(only, ','))) {
        fprintf(stderr, "grit-fuzz: --case and --file need one --target\n");
        return 2;
    }
    int sel[NTARGETS], nsel = 0;
    for (int k = 0; k < NTARGETS; k++) {
        int want = !only;
        if (only) {
            size_t l = strlen(g_targets[k].name);
            for (const char *p = only; *p;) {
                const char *c = strchr(p, ',');
                size_t n = c ? (size_t)(c - p) : strlen(p);
                if (n == l && !strncmp(p, g_targets[k].name, l))
                    want = 1;
                p += n + (c ? 1 : 0);
            }
        }
        if (want)
            sel[nsel++] = k;
    }
    if (!nsel) {
        fprintf(stderr, "grit-fuzz: no target named '%s' (--list)\n", only);
        return 2;
    }
    if (dir)
        snprintf(g_dir, sizeof g_dir, "%s", dir);
    else {
        snprintf(g_dir, sizeof g_dir, "%s/grit-fuzz.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(g_dir))
            die("mkdtemp failed");
        g_own_dir = 1;
        atexit(cleanup);
    }
    signal(SIGALRM, on_alarm);
#if !defined(__SANITIZE_ADDRESS__)
    signal(SIGSEGV, on_fatal);
    signal(SIGBUS, on_fatal);
    signal(SIGFPE, on_fatal);
    signal(SIGABRT, on_fatal);
#else
    (void)on_fatal;
#endif
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(on_death);
    dl_iterate_phdr(set_death_cb, (void *)on_death);

    int fails = 0;
    double budget = seconds / nsel;
    printf("grit-fuzz: seed %llu, %d target(s), %.1f s each, watchdog %u s per input%s\n",
           (unsigned long long)g_seed, nsel, budget, g_timeout,
           __lsan_do_recoverable_leak_check ? (g_leak_each ? ", leak check per input" : ", leak check per 64 inputs") : "");
    fflush(stdout);
    for (int si = 0; si < nsel; si++) {
        target *t = &g_targets[sel[si]];
        g_cur = t;
        t->setup();
        /* fixtures and seeds may hold memory for the whole run: the baseline */
        if (!g_leaked && __lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check()) {
            g_leaked = 1;
            fprintf(stderr, "grit-fuzz: FAIL: leak while setting up target %s\n", t->name);
            fails++;
        }
        tally ty = {0};
        bytes in = {0};
        if (file || one_case >= 0) {
            if (file && read_file(file, &in) != 0)
                die("cannot read --file");
            if (!file)
                make_case(t, g_seed, (uint64_t)one_case, &in);
            set_where(t, "case", (uint64_t)(one_case < 0 ? 0 : one_case), file);
            if (write_to) {
                write_file(write_to, in.p, in.n);
                printf("wrote %zu bytes to %s\n", in.n, write_to);
            }
            fails += run_one(t, &in, &ty, 1);
            free(in.p);
            break;
        }
        double t0 = now();
        int keep = g_leak_each;
        g_leak_each = 1;
        int tfails = run_regressions(t, &ty);
        g_leak_each = keep;
        uint64_t regress = ty.run, batch0 = (uint64_t)first;
        for (uint64_t k = (uint64_t)first;; k++) {
            int last = ncases >= 0 ? k + 1 >= (uint64_t)(first + ncases)
                                   : now() - t0 > budget && k >= (uint64_t)t->nseeds;
            make_case(t, g_seed, k, &in);
            set_where(t, "case", k, NULL);
            g_case = k;
            tfails += run_one(t, &in, &ty, 0);
            if (!g_leak_each && !g_leaked && __lsan_do_recoverable_leak_check &&
                (last || tfails || k + 1 - batch0 >= LEAK_BATCH)) {
                if (__lsan_do_recoverable_leak_check()) {
                    g_leaked = 1;
                    ty.leaks++;
                    tfails++;
                    fprintf(stderr, "grit-fuzz: FAIL: leak (report above) in target %s, cases "
                            "%llu..%llu; replaying them one by one:\n", t->name,
                            (unsigned long long)batch0, (unsigned long long)k);
                    pin_leak(t, batch0, k);
                    break;
                }
                batch0 = k + 1;
            }
            if (g_leaked)
                break;
            if (tfails >= 5) {
                fprintf(stderr, "grit-fuzz: %s: stopping after 5 failures\n", t->name);
                break;
            }
            if (last)
                break;
        }
        free(in.p);
        g_where[0] = 0;
        printf("%-12s seed %llu: %llu inputs (%llu regression), %llu accepted, %llu rejected, "
               "%llu failed, %llu leaked, %.1f s (slowest %.3f s: %s)\n", t->name,
               (unsigned long long)g_seed, (unsigned long long)ty.run,
               (unsigned long long)regress, (unsigned long long)ty.accepted,
               (unsigned long long)ty.rejected, (unsigned long long)ty.bad,
               (unsigned long long)ty.leaks, now() - t0, ty.slowest, ty.slowest_at);
        fflush(stdout);
        fails += tfails;
    }
    for (int k = 0; k < NTARGETS; k++)
        for (int i = 0; i < g_targets[k].nseeds; i++)
            free(g_targets[k].seeds[i].p);
    for (int k = 0; k < 3; k++)
        free(g_idx_bin[k].p);
    if (g_model_ok)
        gx_free(&g_model);
    if (fails)
        fprintf(stderr, "grit-fuzz: %d failure(s)\n", fails);
    else if (one_case < 0 && !file)
        printf("grit-fuzz: no crash, no sanitizer report, no leak, no timeout, every error named "
               "its input\n");
    return fails ? 1 : 0;
}
