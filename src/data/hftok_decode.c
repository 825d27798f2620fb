/*
 * hftok_decode.c - the generic tokenizer's lookups and decoding (see
 * hftok.h): vocabulary size, token id of a string, bytes of a token, and
 * ids -> bytes. Each token's decoded bytes were computed at load from the
 * file's decoder (hftok_load.c); decoding concatenates them and strips the
 * leading spaces the decoder removes (Metaspace's prefix, Strip after Fuse).
 */
#include <stdlib.h>
#include <string.h>

#include "data/hftok_internal.h"

size_t hftok_vocab_size(const hftok *t)
{
    return t->sp ? spm_vocab_size(t->sp) : t->nvocab;
}

grit_err hftok_token_id(const hftok *t, const char *bytes, size_t len, uint32_t *id)
{
    if (t->sp) {
        if (len && spm_piece_id(t->sp, bytes, len, id))
            return GRIT_OK;
    } else {
        for (int k = 0; k < t->nadded; k++)
            if (t->added[k].len == len && !memcmp(t->added[k].s, bytes, len)) {
                *id = t->added[k].id;
                return GRIT_OK;
            }
        if (len && hf__find(t, (const uint8_t *)bytes, len, id))
            return GRIT_OK;
    }
    return grit_errf(GRIT_ENOTFOUND, "token '%.*s' is not in the vocabulary", (int)(len > 64 ? 64 : len), bytes);
}

const char *hftok_token_bytes(const hftok *t, uint32_t id, size_t *len)
{
    if (t->sp)
        return spm_piece(t->sp, id, len);
    if (id >= t->nvocab || (!t->tok_used[id] && t->dec_off[id + 1] == t->dec_off[id]))
        return NULL;
    *len = t->dec_off[id + 1] - t->dec_off[id];
    return (const char *)t->dec_bytes + t->dec_off[id];
}

grit_err hftok_decode(const hftok *t, const uint32_t *ids, size_t n, char *out, size_t cap, size_t *outlen)
{
    if (t->sp)
        return spm_decode(t->sp, ids, n, out, cap, outlen);
    size_t o = 0;
    int strip = t->dec_strip;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = hftok_token_bytes(t, ids[i], &len);
        if (!s)
            return grit_errf(GRIT_EINVAL, "decode: ids[%zu] = %u: not a token of this vocabulary (size %u)", i,
                             ids[i], t->nvocab);
        while (strip > 0 && len > 0 && o == 0 && s[0] == ' ') {
            s++, len--, strip--;
        }
        if (len)
            strip = 0;
        if (o < cap)
            memcpy(out + o, s, len < cap - o ? len : cap - o);
        o += len;
    }
    *outlen = o;
    return GRIT_OK;
}
