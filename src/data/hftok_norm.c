/*
 * hftok_norm.c - the generic tokenizer's text preparation (see hftok.h):
 * UTF-8 validation and U+FFFD repair, and the normalizers (NFC/NFD/NFKC/NFKD
 * through utf8proc, Lowercase, Prepend, Replace, Strip) applied in sequence
 * between two caller-owned ping-pong buffers. Pure functions: no state
 * beyond the buffers passed in.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "data/hftok_internal.h"
#include "data/pretok.h"

/* ---- UTF-8 ------------------------------------------------------------ */

/* Length of the valid sequence at s[i], or 0; *sub gets the length of the
 * maximal subpart (the bytes one U+FFFD replaces) when invalid. */
static size_t utf8_seq(const uint8_t *s, size_t n, size_t i, size_t *sub)
{
    uint8_t b = s[i];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0)
            lo = 0xA0;
        if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0)
            lo = 0x90;
        if (b == 0xF4)
            hi = 0x8F;
    } else {
        *sub = 1;
        return 0;
    }
    size_t k = 1;
    for (; k <= need; k++) {
        if (i + k >= n)
            break;
        uint8_t c = s[i + k];
        if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF))
            break;
    }
    if (k > need)
        return need + 1;
    *sub = k;
    return 0;
}

int hftok_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0, sub;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        size_t l = utf8_seq(s, n, i, &sub);
        if (!l)
            return 0;
        i += l;
    }
    return 1;
}

size_t hftok_utf8_repair(const uint8_t *s, size_t n, uint8_t *out, size_t *outlen)
{
    size_t i = 0, o = 0, bad = 0, sub;
    while (i < n) {
        size_t l = utf8_seq(s, n, i, &sub);
        if (l) {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += sub;
            bad += sub;
        }
    }
    *outlen = o;
    return bad;
}

/* ---- normalizers ---------------------------------------------------------- */

static int is_space_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    int cls;
    *len = pretok_char(s, n, i, &cls);
    return cls == PRETOK_SPACE;
}

/* Applies step st to in[0..n) into *out (growing it); returns the length. */
static grit_err norm_step(const hf_norm *st, const uint8_t *in, size_t n, uint8_t **out, size_t *cap, size_t *len)
{
    grit_err rc;
    size_t o = 0;
    switch (st->kind) {
    case NORM_NFC:
    case NORM_NFD:
    case NORM_NFKC:
    case NORM_NFKD: {
        size_t i = 0;
        while (i < n && in[i] < 0x80)
            i++;
        if (i == n)
            break; /* ASCII: every normal form is the identity */
        int opt = UTF8PROC_STABLE | (st->kind == NORM_NFC || st->kind == NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                  (st->kind >= NORM_NFKC ? UTF8PROC_COMPAT : 0);
        utf8proc_uint8_t *nf = NULL;
        utf8proc_ssize_t nl = utf8proc_map(in, (utf8proc_ssize_t)n, &nf, (utf8proc_option_t)opt);
        if (nl < 0) {
            free(nf);
            return grit_errf(GRIT_EINVAL, "tokenizer: normalizer: %s", utf8proc_errmsg(nl));
        }
        if ((rc = hf__grow((void **)out, cap, (size_t)nl + 1, 1))) {
            free(nf);
            return rc;
        }
        memcpy(*out, nf, (size_t)nl);
        free(nf);
        *len = (size_t)nl;
        return GRIT_OK;
    }
    case NORM_LOWER:
        if ((rc = hf__grow((void **)out, cap, 4 * n + 1, 1)))
            return rc;
        for (size_t i = 0; i < n;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate(in + i, (utf8proc_ssize_t)(n - i), &cp);
            if (l <= 0) {
                (*out)[o++] = in[i++];
                continue;
            }
            o += (size_t)utf8proc_encode_char(utf8proc_tolower(cp), *out + o);
            i += (size_t)l;
        }
        *len = o;
        return GRIT_OK;
    case NORM_PREPEND:
        if (n == 0)
            break;
        if ((rc = hf__grow((void **)out, cap, n + st->la + 1, 1)))
            return rc;
        memcpy(*out, st->a, st->la);
        memcpy(*out + st->la, in, n);
        *len = n + st->la;
        return GRIT_OK;
    case NORM_REPLACE: {
        size_t worst = st->lb > st->la ? n / st->la * st->lb + n : n;
        if ((rc = hf__grow((void **)out, cap, worst + 1, 1)))
            return rc;
        for (size_t i = 0; i < n;) {
            if (in[i] == (uint8_t)st->a[0] && st->la <= n - i && !memcmp(in + i, st->a, st->la)) {
                memcpy(*out + o, st->b, st->lb);
                o += st->lb;
                i += st->la;
            } else
                (*out)[o++] = in[i++];
        }
        *len = o;
        return GRIT_OK;
    }
    case NORM_STRIP: {
        size_t b = 0, e = n, l;
        while (st->left && b < e && is_space_at(in, e, b, &l))
            b += l;
        while (st->right && e > b) {
            size_t k = e - 1;
            while (k > b && (in[k] & 0xC0) == 0x80)
                k--;
            if (!is_space_at(in, e, k, &l))
                break;
            e = k;
        }
        if ((rc = hf__grow((void **)out, cap, e - b + 1, 1)))
            return rc;
        memcpy(*out, in + b, e - b);
        *len = e - b;
        return GRIT_OK;
    }
    }
    if ((rc = hf__grow((void **)out, cap, n + 1, 1)))
        return rc;
    memcpy(*out, in, n);
    *len = n;
    return GRIT_OK;
}

/* Normalizes s[0..n); *res points into nb[0] or nb[1] (grown as needed) or
 * at s when there are no steps. */
grit_err hf__normalize(const hftok *t, const uint8_t *s, size_t n, uint8_t *nb[2], size_t nbcap[2],
                       const uint8_t **res, size_t *rn)
{
    const uint8_t *cur = s;
    size_t cn = n;
    for (int k = 0; k < t->nnorm; k++) {
        int b = k & 1;
        grit_err rc = norm_step(&t->norm[k], cur, cn, &nb[b], &nbcap[b], &cn);
        if (rc)
            return rc;
        cur = nb[b];
    }
    *res = cur;
    *rn = cn;
    return GRIT_OK;
}

grit_err hf__normalize_alloc(const hftok *t, const uint8_t *s, size_t n, uint8_t **out, size_t *outlen)
{
    uint8_t *nb[2] = {NULL, NULL};
    size_t nbcap[2] = {0, 0};
    const uint8_t *r;
    size_t rn;
    grit_err rc = hf__normalize(t, s, n, nb, nbcap, &r, &rn);
    if (!rc) {
        *out = malloc(rn + 1);
        if (!*out)
            rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", t->path);
        else {
            memcpy(*out, r, rn);
            (*out)[rn] = 0;
            *outlen = rn;
        }
    }
    free(nb[0]);
    free(nb[1]);
    return rc;
}

