/*
 * tok_check.c - grit-tok-check: compares grit's token ids with reference ids
 * (made by ref_ids.js) and measures encoding speed.
 *
 *   grit-tok-check check gpt2 VOCAB.json MERGES.txt DIR BASE...
 *   grit-tok-check check neox TOKENIZER.json DIR BASE...
 *       encodes the raw bytes DIR/BASE (or DIR/BASE.txt when there is no raw
 *       file; invalid UTF-8 included: grit replaces
 *       it with U+FFFD as the references' decoders do), compares with
 *       DIR/BASE.<mode>.ids; prints the first differing position with context
 *       and the bytes replaced; for gpt2 also checks that decoding gives back
 *       DIR/BASE.txt (the string the reference saw). Byte-exact mode too:
 *       gpt2 must decode back to the raw bytes; neox must refuse a byte it has
 *       no token for (naming it) and encode everything else.
 *       Exit 1 on any difference.
 *   grit-tok-check check hf|generic TAG TOKENIZER DIR BASE...
 *       any tokenizer.json or .model (bpe_open_file; generic: the generic
 *       path even where the fast path applies), BOS/EOS added as the
 *       post-processor says; compares with DIR/BASE.TAG.ids; checks that
 *       decoding gives back the text for byte-level files. Exit 1 on any
 *       difference.
 *   grit-tok-check bench gpt2|neox MODEL... FILE [REPEAT]
 *   grit-tok-check bench hf|generic TOKENIZER FILE [REPEAT]
 *       encodes FILE REPEAT times (one thread) and prints tokens/s and MB/s.
 *   grit-tok-check lines TOKENIZER FILE
 *       prints the ids of each line of FILE (as spm_encode --output_format=id).
 *   grit-tok-check open TOKENIZER
 *       opens the file and prints the path taken (exit 1 with the error).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "data/bpe.h"

static void put_token(const bpe *t, uint32_t id)
{
    size_t len;
    const char *s = bpe_token_bytes(t, id, &len);
    printf("%u'", id);
    for (size_t i = 0; s && i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'')
            putchar(ch);
        else
            printf("\\x%02x", ch);
    }
    printf("' ");
}

static void context(const bpe *t, const char *name, const uint32_t *v, size_t n, size_t at)
{
    printf("  %-5s:", name);
    for (size_t i = at > 5 ? at - 5 : 0; i < n && i < at + 6; i++) {
        if (i == at)
            printf(">>");
        put_token(t, v[i]);
    }
    printf("\n");
}

/* Byte-exact mode on the raw bytes (see the header). Returns 1 on a failure. */
static int check_exact(const bpe *t, bpe_ctx *c, const char *mode, const char *base, const char *raw,
                       size_t rlen, int flags)
{
    bpe_ids ids = {0};
    int dead = -1, bad = 1;
    for (size_t i = 0; i < rlen && dead < 0; i++) {
        uint32_t id;
        char b = raw[i];
        if (bpe_token_id(t, &b, 1, &id) != GRIT_OK)
            dead = (unsigned char)b;
    }
    grit_err rc = bpe_encode(c, raw, rlen, flags | BPE_BYTE_EXACT, &ids);
    if (dead >= 0) {
        char want[32];
        snprintf(want, sizeof want, "byte 0x%02X", dead);
        if (rc != GRIT_EINVAL || !strstr(grit_errmsg(), want) || !strstr(grit_errmsg(), "no token")) {
            printf("FAIL %s [%s byte-exact]: byte 0x%02X has no token; expected an error naming "
                   "it, got rc %d (%s)\n", base, mode, dead, rc, rc ? grit_errmsg() : "success");
            goto out;
        }
        printf("ok   %s [%s byte-exact]: refused: %s\n", base, mode, grit_errmsg());
    } else if (rc) {
        printf("FAIL %s [%s byte-exact]: encode: %s\n", base, mode, grit_errmsg());
        goto out;
    } else if (strcmp(mode, "gpt2") == 0) {
        size_t dl;
        char *d = malloc(rlen + 1);
        if (bpe_decode(t, ids.v, ids.n, d, rlen, &dl) || dl != rlen || memcmp(d, raw, rlen) != 0) {
            printf("FAIL %s [%s byte-exact]: decode(encode(bytes)) != bytes\n", base, mode);
            free(d);
            goto out;
        }
        free(d);
        printf("ok   %s [%s byte-exact]: %zu tokens decode to the %zu raw bytes\n", base, mode, ids.n,
               rlen);
    } else {
        printf("ok   %s [%s byte-exact]: %zu tokens\n", base, mode, ids.n);
    }
    bad = 0;
out:
    bpe_ids_free(&ids);
    return bad;
}

static int check_one(const bpe *t, bpe_ctx *c, const char *mode, const char *tag, const char *dir,
                     const char *base)
{
    int hf = !strcmp(mode, "hf") || !strcmp(mode, "generic");
    char tp[4096], ip[4096], rp[4096];
    snprintf(rp, sizeof rp, "%s/%s", dir, base);
    snprintf(tp, sizeof tp, "%s/%s.txt", dir, base);
    snprintf(ip, sizeof ip, "%s/%s.%s.ids", dir, base, tag);
    char *text = NULL, *raw = NULL, *bytes = NULL;
    size_t tlen, rlen, blen;
    bpe_ids ids = {0};
    int bad = 1;
    int flags = hf ? BPE_ALLOW_SPECIAL | BPE_ADD_SPECIAL : strcmp(mode, "neox") == 0 ? BPE_ALLOW_SPECIAL : 0;
    if (fs_read_all(tp, &text, &tlen) || fs_read_all(ip, &raw, &rlen)) {
        fprintf(stderr, "tok-check: %s\n", grit_errmsg());
        goto out;
    }
    if (access(rp, F_OK) != 0) { /* no raw file: the text is the input */
        snprintf(rp, sizeof rp, "%s", tp);
    }
    if (fs_read_all(rp, &bytes, &blen)) {
        fprintf(stderr, "tok-check: %s\n", grit_errmsg());
        goto out;
    }
    uint64_t rep0 = bpe_ctx_replaced(c);
    if (bpe_encode(c, bytes, blen, flags, &ids)) {
        fprintf(stderr, "tok-check: %s: encode: %s\n", base, grit_errmsg());
        goto out;
    }
    uint64_t replaced = bpe_ctx_replaced(c) - rep0;
    size_t nref = rlen / 4;
    uint32_t *ref = malloc((nref ? nref : 1) * 4);
    memcpy(ref, raw, nref * 4);
    size_t i = 0;
    while (i < ids.n && i < nref && ids.v[i] == ref[i])
        i++;
    if (i < ids.n || i < nref) {
        printf("FAIL %s [%s]: first difference at token %zu (grit %zu tokens, reference %zu)\n", base, mode, i,
               ids.n, nref);
        context(t, "grit", ids.v, ids.n, i);
        context(t, "ref", ref, nref, i);
        free(ref);
        goto out;
    }
    free(ref);
    if (strcmp(mode, "gpt2") == 0 || (hf && getenv("TOK_CHECK_DECODE") && *getenv("TOK_CHECK_DECODE"))) {
        size_t dl;
        char *d = malloc(tlen + 1);
        if (bpe_decode(t, ids.v, ids.n, d, tlen, &dl) || dl != tlen || memcmp(d, text, tlen) != 0) {
            printf("FAIL %s [%s]: decode(encode(text)) != text (%zu vs %zu bytes)\n", base, mode, dl, tlen);
            free(d);
            goto out;
        }
        free(d);
    }
    printf("ok   %s [%s]: %zu tokens, %zu bytes identical, %llu invalid UTF-8 bytes replaced\n", base,
           mode, ids.n, blen, (unsigned long long)replaced);
    bad = hf ? 0 : check_exact(t, c, mode, base, bytes, blen, flags);
out:
    bpe_ids_free(&ids);
    free(text);
    free(raw);
    free(bytes);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "open") == 0) {
        bpe *o = NULL;
        if (bpe_open_hf(&o, argv[2])) {
            fprintf(stderr, "tok-check: %s\n", grit_errmsg());
            return 1;
        }
        printf("%s: %s path, %zu tokens\n", argv[2], bpe_is_generic(o) ? "generic" : "fast", bpe_vocab_size(o));
        bpe_close(o);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "lines") == 0) {
        /* ids of each line of FILE (no BOS/EOS), one line of ids per line, as spm_encode prints */
        bpe *o = NULL;
        bpe_ctx *oc = NULL;
        char *text;
        size_t len;
        if (bpe_open_hf(&o, argv[2]) || bpe_ctx_open(&oc, o) || fs_read_all(argv[3], &text, &len)) {
            fprintf(stderr, "tok-check: %s\n", grit_errmsg());
            return 1;
        }
        bpe_ids ids = {0};
        for (size_t i = 0; i < len;) {
            size_t e = i;
            while (e < len && text[e] != '\n')
                e++;
            ids.n = 0;
            if (bpe_encode(oc, text + i, e - i, getenv("TOK_CHECK_ADD_SPECIAL") ? BPE_ADD_SPECIAL : 0, &ids)) {
                fprintf(stderr, "tok-check: %s\n", grit_errmsg());
                return 1;
            }
            for (size_t k = 0; k < ids.n; k++)
                printf(k ? " %u" : "%u", ids.v[k]);
            printf("\n");
            i = e + 1;
        }
        bpe_ids_free(&ids);
        free(text);
        bpe_ctx_close(oc);
        bpe_close(o);
        return 0;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: grit-tok-check check|bench gpt2 VOCAB MERGES ... | neox TOKENIZER.json ...\n");
        return 2;
    }
    const char *cmd = argv[1], *mode = argv[2], *tag = mode;
    bpe *t = NULL;
    int argi;
    grit_err rc;
    if ((!strcmp(mode, "hf") || !strcmp(mode, "generic")) && !strcmp(cmd, "check") && argc >= 6) {
        tag = argv[3];
        rc = bpe_open_file(&t, argv[4], !strcmp(mode, "generic") ? BPE_OPEN_GENERIC : 0);
        argi = 5;
    } else if ((!strcmp(mode, "hf") || !strcmp(mode, "generic")) && argc >= 5) {
        rc = bpe_open_file(&t, argv[3], !strcmp(mode, "generic") ? BPE_OPEN_GENERIC : 0);
        argi = 4;
    } else if (strcmp(mode, "gpt2") == 0 && argc >= 5) {
        rc = bpe_open_gpt2(&t, argv[3], argv[4]);
        argi = 5;
    } else if (strcmp(mode, "neox") == 0) {
        rc = bpe_open_hf(&t, argv[3]);
        argi = 4;
    } else {
        fprintf(stderr, "tok-check: mode: expected gpt2, neox, hf or generic, got %s\n", mode);
        return 2;
    }
    if (rc) {
        fprintf(stderr, "tok-check: %s\n", grit_errmsg());
        return 1;
    }
    bpe_ctx *c = NULL;
    if (bpe_ctx_open(&c, t)) {
        fprintf(stderr, "tok-check: %s\n", grit_errmsg());
        return 1;
    }
    int fails = 0;
    if (strcmp(cmd, "check") == 0 && argi + 1 < argc) {
        for (int i = argi + 1; i < argc; i++)
            fails += check_one(t, c, mode, tag, argv[argi], argv[i]);
        printf("%s: %d of %d files differ\n", mode, fails, argc - argi - 1);
    } else if (strcmp(cmd, "bench") == 0 && argi < argc) {
        char *text;
        size_t len;
        if (fs_read_all(argv[argi], &text, &len)) {
            fprintf(stderr, "tok-check: %s\n", grit_errmsg());
            return 1;
        }
        int rep = argi + 1 < argc ? atoi(argv[argi + 1]) : 3;
        bpe_ids ids = {0};
        double best = 1e30, first = 0;
        size_t ntok = 0;
        for (int r = 0; r < rep; r++) {
            struct timespec a, b;
            ids.n = 0;
            clock_gettime(CLOCK_MONOTONIC, &a);
            /* TOK_BENCH_DOC=N: documents of at least N bytes, cut at line ends */
            size_t doc = getenv("TOK_BENCH_DOC") ? (size_t)atol(getenv("TOK_BENCH_DOC")) : len;
            for (size_t i = 0; i < len;) {
                size_t e = i;
                while (e < len && (e - i < doc || text[e - 1] != '\n'))
                    e++;
                bpe_encode(c, text + i, e - i, strcmp(mode, "gpt2") ? BPE_ALLOW_SPECIAL : 0, &ids);
                i = e;
            }
            clock_gettime(CLOCK_MONOTONIC, &b);
            double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
            if (r == 0)
                first = s;
            if (s < best)
                best = s;
            ntok = ids.n;
        }
        printf("%s 1 thread: %zu bytes, %zu tokens; cold cache: %.3f s, %.2f M tokens/s, %.1f MB/s; "
               "warm, best of %d: %.3f s, %.2f M tokens/s, %.1f MB/s\n",
               mode, len, ntok, first, (double)ntok / first / 1e6, (double)len / first / 1e6, rep, best,
               (double)ntok / best / 1e6, (double)len / best / 1e6);
        bpe_ids_free(&ids);
        free(text);
    } else {
        fprintf(stderr, "tok-check: bad arguments\n");
        fails = 2;
    }
    bpe_ctx_close(c);
    bpe_close(t);
    return fails ? 1 : 0;
}
