/* urlfilter.c - see urlfilter.h. Sets are sorted string arrays searched
 * with bsearch: a few million domains cost their bytes plus a pointer each. */
#include "prep/urlfilter.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

typedef struct sset {
    char **v;
    size_t n, cap;
} sset;

struct urlf {
    sset domain, url, allow, strict, hard, soft;
    int soft_threshold;
    char *text; /* the file, lower-cased; every string points into it */
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static grit_err sset_add(sset *s, char *w)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, nc * sizeof *v);
        if (!v)
            return GRIT_ENOMEM;
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n++] = w;
    return GRIT_OK;
}

static int sset_has(const sset *s, const char *w)
{
    return s->n && bsearch(&w, s->v, s->n, sizeof *s->v, cmp_str) != NULL;
}

static void sset_free(sset *s)
{
    free(s->v);
}

void urlf_free(urlf *f)
{
    if (!f)
        return;
    sset_free(&f->domain);
    sset_free(&f->url);
    sset_free(&f->allow);
    sset_free(&f->strict);
    sset_free(&f->hard);
    sset_free(&f->soft);
    free(f->text);
    free(f);
}

size_t urlf_rules(const urlf *f)
{
    return f->domain.n + f->url.n + f->allow.n + f->strict.n + f->hard.n + f->soft.n;
}

const char *urlf_reason_name(int reason)
{
    static const char *const n[] = {"", "url_listed", "url_domain", "url_strict_word",
                                    "url_hard_word", "url_soft_words"};
    return reason > 0 && reason <= URLF_SOFT ? n[reason] : "";
}

grit_err urlf_load(urlf **out, const char *path, uint64_t *hash)
{
    *out = NULL;
    urlf *f = calloc(1, sizeof *f);
    size_t len = 0;
    if (!f)
        return GRIT_ENOMEM;
    f->soft_threshold = 3;
    grit_err rc = fs_read_all(path, &f->text, &len);
    if (rc != GRIT_OK) {
        free(f);
        return grit_errf(rc, "url block-list %s: %s", path, grit_errmsg());
    }
    for (size_t i = 0; i < len; i++)
        if (f->text[i] >= 'A' && f->text[i] <= 'Z')
            f->text[i] = (char)(f->text[i] + 32);
    char *p = f->text;
    long line = 0;
    while (rc == GRIT_OK && p && *p) {
        line++;
        char *nl = strchr(p, '\n'), *next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = 0;
        char *hash_c = strchr(p, '#');
        if (hash_c)
            *hash_c = 0;
        char *a = strtok(p, " \t\r"), *b = a ? strtok(NULL, " \t\r") : NULL;
        char *c = b ? strtok(NULL, " \t\r") : NULL;
        if (!a) {
            p = next;
            continue;
        }
        if (c || (!b && (!strcmp(a, "domain") || !strcmp(a, "url") || !strcmp(a, "allow") ||
                         !strcmp(a, "strict") || !strcmp(a, "hard") || !strcmp(a, "soft") ||
                         !strcmp(a, "soft_threshold")))) {
            rc = grit_errf(GRIT_EFORMAT, "%s:%ld: expected 'DOMAIN' or 'KIND VALUE' (KIND: "
                           "domain, url, allow, strict, hard, soft, soft_threshold)", path, line);
            break;
        }
        if (!b)
            rc = sset_add(&f->domain, a);
        else if (!strcmp(a, "domain"))
            rc = sset_add(&f->domain, b);
        else if (!strcmp(a, "url"))
            rc = sset_add(&f->url, b);
        else if (!strcmp(a, "allow"))
            rc = sset_add(&f->allow, b);
        else if (!strcmp(a, "strict"))
            rc = sset_add(&f->strict, b);
        else if (!strcmp(a, "hard"))
            rc = sset_add(&f->hard, b);
        else if (!strcmp(a, "soft"))
            rc = sset_add(&f->soft, b);
        else if (!strcmp(a, "soft_threshold")) {
            char *end;
            long v = strtol(b, &end, 10);
            if (*end || v < 1 || v > 1000)
                rc = grit_errf(GRIT_EFORMAT, "%s:%ld: soft_threshold: expected an integer in "
                               "[1, 1000], got '%s'", path, line, b);
            else
                f->soft_threshold = (int)v;
        } else {
            rc = grit_errf(GRIT_EFORMAT, "%s:%ld: unknown rule '%s' (expected domain, url, "
                           "allow, strict, hard, soft or soft_threshold)", path, line, a);
        }
        p = next;
    }
    /* the rules' hash: every set sorted, so the order of lines does not matter */
    XXH3_state_t *st = rc == GRIT_OK ? XXH3_createState() : NULL;
    if (rc == GRIT_OK && !st)
        rc = GRIT_ENOMEM;
    if (rc == GRIT_OK) {
        XXH3_64bits_reset(st);
        sset *all[] = {&f->domain, &f->url, &f->allow, &f->strict, &f->hard, &f->soft};
        for (int k = 0; k < 6; k++) {
            qsort(all[k]->v, all[k]->n, sizeof *all[k]->v, cmp_str);
            for (size_t i = 0; i < all[k]->n; i++)
                XXH3_64bits_update(st, all[k]->v[i], strlen(all[k]->v[i]) + 1);
            XXH3_64bits_update(st, "|", 1);
        }
        XXH3_64bits_update(st, &f->soft_threshold, sizeof f->soft_threshold);
        *hash = XXH3_64bits_digest(st);
        XXH3_freeState(st);
    }
    if (rc != GRIT_OK) {
        urlf_free(f);
        return rc;
    }
    *out = f;
    return GRIT_OK;
}

/* host or one of its parent domains in s */
static int domain_in(const sset *s, const char *host)
{
    for (const char *h = host; h; ) {
        if (sset_has(s, h))
            return 1;
        h = strchr(h, '.');
        h = h ? h + 1 : NULL;
    }
    return 0;
}

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80;
}

int urlf_check(const urlf *f, const char *url, size_t len)
{
    char buf[2048], host[512];
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    for (size_t i = 0; i < len; i++)
        buf[i] = url[i] >= 'A' && url[i] <= 'Z' ? (char)(url[i] + 32) : url[i];
    buf[len] = 0;
    const char *h = strstr(buf, "://");
    h = h ? h + 3 : buf;
    const char *at = h + strcspn(h, "/?#");
    const char *cred = memchr(h, '@', (size_t)(at - h)); /* user:pass@host */
    if (cred)
        h = cred + 1;
    size_t hl = strcspn(h, ":/?#");
    if (hl >= sizeof host)
        hl = sizeof host - 1;
    memcpy(host, h, hl);
    host[hl] = 0;
    if (hl && host[hl - 1] == '.')
        host[hl - 1] = 0;
    if (domain_in(&f->allow, host))
        return URLF_KEEP;
    if (sset_has(&f->url, buf))
        return URLF_URL;
    if (domain_in(&f->domain, host))
        return URLF_DOMAIN;
    for (size_t i = 0; i < f->strict.n; i++)
        if (strstr(buf, f->strict.v[i]))
            return URLF_STRICT;
    int soft = 0;
    const char *seen[64];
    for (char *p = buf; *p;) {
        while (*p && !is_word_byte((unsigned char)*p))
            p++;
        char *w = p;
        while (*p && is_word_byte((unsigned char)*p))
            p++;
        if (w == p)
            break;
        int last = *p == 0;
        *p = 0; /* the word stays a string: seen[] points at it */
        if (sset_has(&f->hard, w))
            return URLF_HARD;
        if (sset_has(&f->soft, w)) {
            int dup = 0;
            for (int k = 0; k < soft; k++)
                dup |= !strcmp(seen[k], w);
            if (!dup && soft < 64)
                seen[soft++] = w;
        }
        if (!last)
            p++;
    }
    return soft >= f->soft_threshold ? URLF_SOFT : URLF_KEEP;
}
