/*
 * test_bpe.c - the BPE tokenizer on tiny hand-made vocabularies written to a
 * temp dir: merge order by rank, special tokens only when asked, round trip
 * on random bytes (invalid UTF-8 included), the word cache (hits and a full
 * reset), two threads with their own contexts, the Hugging Face loader (NFC,
 * added tokens), and load errors that name the file and field.
 * Parity with the real GPT-2 / NeoX vocabularies is tests/tok/run_parity.sh.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/bpe.h"
#include "data/pretok.h"

static char dir[256];

/* Appends the JSON string literal of a byte-mapped token for raw bytes s. */
static size_t json_mapped(char *o, const char *s, size_t n)
{
    static int map[256];
    if (!map[0]) {
        int extra = 0;
        for (int b = 0; b < 256; b++) {
            int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            map[b] = printable ? b : 256 + extra++;
        }
    }
    size_t k = 0;
    o[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        int cp = map[(unsigned char)s[i]];
        if (cp == '"' || cp == '\\') {
            o[k++] = '\\';
            o[k++] = (char)cp;
        } else if (cp < 0x80) {
            o[k++] = (char)cp;
        } else {
            o[k++] = (char)(0xC0 | (cp >> 6));
            o[k++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    o[k++] = '"';
    return k;
}

static const char *merges[][2] = {{"b", "c"}, {"a", "b"}, {"h", "e"}, {"l", "l"}, {"he", "ll"},
                                  {"hell", "o"}, {" ", "w"}, {" w", "o"}, {"\xcc", "\x81"}, {"e", "\xcc\x81"}};
#define NMERGES (int)(sizeof merges / sizeof merges[0])

/* vocab: the 256 bytes (id = byte), then one token per merge, then
 * <|endoftext|> (and two added tokens in the HF variant). */
static char *vocab_body(void)
{
    char *v = malloc(1 << 16), *o = v;
    *o++ = '{';
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        o += json_mapped(o, &c, 1);
        o += sprintf(o, ": %d, ", b);
    }
    for (int m = 0; m < NMERGES; m++) {
        char cat[32];
        snprintf(cat, sizeof cat, "%s%s", merges[m][0], merges[m][1]);
        o += json_mapped(o, cat, strlen(cat));
        o += sprintf(o, ": %d, ", 256 + m);
    }
    o += sprintf(o, "\"<|endoftext|>\": %d}", 256 + NMERGES);
    return v;
}

static char *merges_text(int json)
{
    char *v = malloc(1 << 14), *o = v;
    o += sprintf(o, json ? "[" : "#version: 0.2\n");
    for (int m = 0; m < NMERGES; m++) {
        char l[32], r[32];
        size_t ln = json_mapped(l, merges[m][0], strlen(merges[m][0]));
        size_t rn = json_mapped(r, merges[m][1], strlen(merges[m][1]));
        if (json)
            o += sprintf(o, "%s%.*s %.*s\"", m ? ", " : "", (int)ln - 1, l, (int)rn - 2, r + 1);
        else
            o += sprintf(o, "%.*s %.*s\n", (int)ln - 2, l + 1, (int)rn - 2, r + 1);
    }
    if (json)
        o += sprintf(o, "]");
    return v;
}

static void write_file(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fs_write_durable(p, text, strlen(text)) != GRIT_OK) {
        fprintf(stderr, "cannot write %s: %s\n", p, grit_errmsg());
        exit(1);
    }
}

static const char *path(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void expect_ids(bpe_ctx *c, const char *text, int flags, const uint32_t *want, size_t nwant)
{
    bpe_ids ids = {0};
    CHECK(bpe_encode(c, text, strlen(text), flags, &ids) == GRIT_OK);
    int same = ids.n == nwant && memcmp(ids.v, want, nwant * sizeof *want) == 0;
    if (!same) {
        fprintf(stderr, "encode('%s'):\n  got: ", text);
        for (size_t i = 0; i < ids.n; i++)
            fprintf(stderr, " %u", ids.v[i]);
        fprintf(stderr, "\n  want:");
        for (size_t i = 0; i < nwant; i++)
            fprintf(stderr, " %u", want[i]);
        fprintf(stderr, "\n");
        check_failures++;
    }
    bpe_ids_free(&ids);
}
#define EXPECT_IDS(c, text, flags, ...)                                          \
    do {                                                                         \
        const uint32_t w_[] = {__VA_ARGS__};                                     \
        expect_ids(c, text, flags, w_, sizeof w_ / sizeof w_[0]);                \
    } while (0)

typedef struct job {
    const bpe *t;
    const char *text;
    size_t len;
    bpe_ids out;
    grit_err rc;
} job;

static void *encode_job(void *arg)
{
    job *j = arg;
    bpe_ctx *c;
    if ((j->rc = bpe_ctx_open(&c, j->t)))
        return NULL;
    for (int r = 0; r < 3 && !j->rc; r++) {
        j->out.n = 0;
        j->rc = bpe_encode(c, j->text, j->len, 0, &j->out);
    }
    bpe_ctx_close(c);
    return NULL;
}

static void test_gpt2(void)
{
    char *v = vocab_body(), *m = merges_text(0);
    write_file("vocab.json", v);
    write_file("merges.txt", m);
    free(v);
    free(m);
    bpe *t = NULL;
    CHECK(bpe_open_gpt2(&t, path("vocab.json"), path("merges.txt")) == GRIT_OK);
    if (!t) {
        fprintf(stderr, "open: %s\n", grit_errmsg());
        check_failures++;
        return;
    }
    bpe_ctx *c;
    CHECK(bpe_ctx_open(&c, t) == GRIT_OK);
    CHECK_EQ_LL(bpe_vocab_size(t), 256 + NMERGES + 1);
    EXPECT_IDS(c, "abc", 0, 'a', 256);                 /* "b c" has rank 0, so a|bc, not ab|c */
    EXPECT_IDS(c, "hello world", 0, 261, 263, 'r', 'l', 'd');
    EXPECT_IDS(c, "ab", 0, 257);
    EXPECT_IDS(c, "x<|endoftext|>", 0, 'x', '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>');
    EXPECT_IDS(c, "x<|endoftext|>y", BPE_ALLOW_SPECIAL, 'x', 256 + NMERGES, 'y');
    EXPECT_IDS(c, "e\xcc\x81", 0, 'e', 264); /* GPT-2 does not normalize: e, then U+0301 alone */

    /* Round trip on random bytes, and the cache gives the same ids twice. */
    srand(7);
    char *buf = malloc(20000), *back = malloc(60000), *lossy_buf = malloc(60000);
    for (int iter = 0; iter < 200; iter++) {
        size_t n = (size_t)(rand() % 20000);
        for (size_t i = 0; i < n; i++) {
            int r = rand() % 10;
            buf[i] = r < 4 ? "hello wabc '\n"[rand() % 13] : (char)(rand() % 256);
        }
        bpe_ids a = {0}, b = {0}, l = {0};
        CHECK(bpe_encode(c, buf, n, BPE_BYTE_EXACT, &a) == GRIT_OK);
        CHECK(bpe_encode(c, buf, n, BPE_BYTE_EXACT, &b) == GRIT_OK);
        CHECK(a.n == b.n && memcmp(a.v, b.v, a.n * 4) == 0);
        size_t dl;
        CHECK(bpe_decode(t, a.v, a.n, back, 20000, &dl) == GRIT_OK);
        if (dl != n || memcmp(back, buf, n) != 0) {
            fprintf(stderr, "round trip failed at iteration %d: %zu bytes in, %zu out\n", iter, n, dl);
            check_failures++;
            break;
        }
        /* default mode: the text decoded with U+FFFD replacement, every bad byte counted */
        uint64_t rep0 = bpe_ctx_replaced(c);
        size_t rep, ln = pretok_utf8_lossy((const uint8_t *)buf, n, (uint8_t *)lossy_buf, &rep);
        CHECK(bpe_encode(c, buf, n, 0, &l) == GRIT_OK);
        CHECK(bpe_decode(t, l.v, l.n, back, 60000, &dl) == GRIT_OK);
        if (dl != ln || memcmp(back, lossy_buf, ln) != 0 || bpe_ctx_replaced(c) - rep0 != rep) {
            fprintf(stderr, "lossy round trip failed at iteration %d\n", iter);
            check_failures++;
            break;
        }
        bpe_ids_free(&a);
        bpe_ids_free(&b);
        bpe_ids_free(&l);
    }

    /* More distinct words than the cache holds: it resets, ids stay right. */
    size_t big = 0;
    char *text = malloc(2000000);
    for (int i = 0; i < 150000; i++)
        big += (size_t)sprintf(text + big, " w%dabc", i);
    bpe_ids once = {0};
    CHECK(bpe_encode(c, text, big, 0, &once) == GRIT_OK);
    job jobs[2] = {{t, text, big, {0}, 0}, {t, text, big, {0}, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, encode_job, &jobs[k]);
    for (int k = 0; k < 2; k++) {
        pthread_join(th[k], NULL);
        CHECK(jobs[k].rc == GRIT_OK);
        CHECK(jobs[k].out.n == once.n && memcmp(jobs[k].out.v, once.v, once.n * 4) == 0);
        bpe_ids_free(&jobs[k].out);
    }
    size_t dl;
    CHECK(bpe_decode(t, once.v, once.n, NULL, 0, &dl) == GRIT_OK);
    CHECK_EQ_LL(dl, big);
    bpe_ids_free(&once);
    free(text);

    uint32_t bad = 99999;
    CHECK(bpe_decode(t, &bad, 1, back, 10, &dl) == GRIT_EINVAL);
    CHECK_ERRMSG("99999");
    uint32_t id;
    CHECK(bpe_token_id(t, "<|endoftext|>", 13, &id) == GRIT_OK && id == 256 + NMERGES);
    CHECK(bpe_token_id(t, "nope", 4, &id) == GRIT_ENOTFOUND);
    free(buf);
    free(back);
    free(lossy_buf);
    bpe_ctx_close(c);
    bpe_close(t);
}

static void test_hf(void)
{
    char *v = vocab_body(), *m = merges_text(1);
    size_t cap = strlen(v) + strlen(m) + 4096;
    char *j = malloc(cap);
    /* Drop the closing brace of the vocab to append two added tokens' ids. */
    v[strlen(v) - 1] = 0;
    snprintf(j, cap,
             "{\"version\": \"1.0\", \"normalizer\": {\"type\": \"NFC\"},\n"
             " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true},\n"
             " \"added_tokens\": [\n"
             "  {\"id\": %d, \"content\": \"<|endoftext|>\", \"special\": true, \"normalized\": false},\n"
             "  {\"id\": %d, \"content\": \"   \", \"special\": false, \"normalized\": true},\n"
             "  {\"id\": %d, \"content\": \"  \", \"special\": false, \"normalized\": true}],\n"
             " \"model\": {\"type\": \"BPE\", \"vocab\": %s}, \"merges\": %s}}\n",
             256 + NMERGES, 257 + NMERGES, 258 + NMERGES, v, m);
    write_file("tokenizer.json", j);
    free(v);
    free(m);
    free(j);
    bpe *t = NULL;
    CHECK(bpe_open_hf(&t, path("tokenizer.json")) == GRIT_OK);
    if (!t) {
        fprintf(stderr, "open: %s\n", grit_errmsg());
        check_failures++;
        return;
    }
    bpe_ctx *c;
    CHECK(bpe_ctx_open(&c, t) == GRIT_OK);
    /* NFC: e + U+0301 becomes U+00E9 (c3 a9) before BPE. */
    EXPECT_IDS(c, "e\xcc\x81", 0, 0xc3, 0xa9);
    /* Space runs: leftmost-longest added token, split before pre-tokenising. */
    EXPECT_IDS(c, "a     b", 0, 'a', 257 + NMERGES, 258 + NMERGES, 'b');
    EXPECT_IDS(c, "a b", 0, 'a', ' ', 'b');
    EXPECT_IDS(c, "x<|endoftext|>", 0, 'x', '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>');
    EXPECT_IDS(c, "x<|endoftext|>", BPE_ALLOW_SPECIAL, 'x', 256 + NMERGES);
    bpe_ctx_close(c);
    bpe_close(t);
}

static void test_errors(void)
{
    bpe *t = NULL;
    CHECK(bpe_open_gpt2(&t, path("missing.json"), path("merges.txt")) != GRIT_OK && t == NULL);
    CHECK_ERRMSG("missing.json");
    write_file("bad_merges.txt", "#version: 0.2\nh e\nq zz\n");
    CHECK(bpe_open_gpt2(&t, path("vocab.json"), path("bad_merges.txt")) == GRIT_EFORMAT);
    CHECK_ERRMSG("bad_merges.txt");
    CHECK_ERRMSG("merge 1");
    write_file("bad_merges2.txt", "#version: 0.2\nh e x\n");
    CHECK(bpe_open_gpt2(&t, path("vocab.json"), path("bad_merges2.txt")) == GRIT_EFORMAT);
    CHECK_ERRMSG("bad_merges2.txt:2");
    write_file("bad_vocab.json", "{\"a\": \"one\"}");
    CHECK(bpe_open_gpt2(&t, path("bad_vocab.json"), path("merges.txt")) == GRIT_EFORMAT);
    CHECK_ERRMSG("vocab['a']");
    write_file("short_vocab.json", "{\"a\": 0}");
    CHECK(bpe_open_gpt2(&t, path("short_vocab.json"), path("merges.txt")) == GRIT_EFORMAT);
    CHECK_ERRMSG("every ASCII byte");
    write_file("wordpiece.json", "{\"model\": {\"type\": \"WordPiece\"}}");
    CHECK(bpe_open_hf(&t, path("wordpiece.json")) == GRIT_EFORMAT);
    CHECK_ERRMSG("model.type");
    write_file("precompiled.json", "{\"normalizer\": {\"type\": \"Precompiled\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}");
    CHECK(bpe_open_hf(&t, path("precompiled.json")) == GRIT_EFORMAT);
    CHECK_ERRMSG("normalizer");
    write_file("broken.json", "{\"model\": ");
    CHECK(bpe_open_hf(&t, path("broken.json")) == GRIT_EFORMAT);
    CHECK_ERRMSG("broken.json:");
    CHECK(t == NULL);
    bpe_close(NULL);
    bpe_ctx_close(NULL);
    bpe_ids_free(NULL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/grit_test_bpe_%ld", (long)getpid());
    if (fs_mkdirs(dir) != GRIT_OK)
        return 1;
    test_gpt2();
    test_hf();
    test_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
    return CHECK_RESULT();
}
