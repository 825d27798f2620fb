// spm.cc - the C shim over libsentencepiece's C++ API, for SentencePiece
// .model files (Llama 2 / TinyLlama / Mistral ship one beside
// tokenizer.json). Functions are extern "C" and declared in
// hftok_internal.h; hftok.c reaches them for a tokenizer opened from a
// .model file. A SentencePieceProcessor is immutable after Load and its
// Encode is const, so one `spm` serves any number of threads. Exceptions
// never cross the boundary: they become GRIT_ENOMEM.
#include <sentencepiece_processor.h>

#include <new>
#include <string>
#include <vector>

extern "C" {
#include "data/hftok_internal.h"
}

struct spm {
    sentencepiece::SentencePieceProcessor p;
};

extern "C" grit_err spm_open(spm **out, const char *path)
{
    *out = NULL;
    try {
        spm *s = new spm;
        auto st = s->p.Load(path);
        if (!st.ok()) {
            std::string m = st.ToString();
            delete s;
            return grit_errf(GRIT_EFORMAT, "%s: not a SentencePiece model: %s", path, m.c_str());
        }
        *out = s;
        return GRIT_OK;
    } catch (...) {
        return grit_errf(GRIT_ENOMEM, "%s: out of memory loading a SentencePiece model", path);
    }
}

extern "C" void spm_close(spm *s)
{
    delete s;
}

extern "C" size_t spm_vocab_size(const spm *s)
{
    return (size_t)s->p.GetPieceSize();
}

extern "C" grit_err spm_encode(const spm *s, const char *text, size_t len, int add_special, bpe_ids *ids)
{
    try {
        std::vector<int> v;
        auto st = s->p.Encode(std::string_view(text, len), &v);
        if (!st.ok())
            return grit_errf(GRIT_EINVAL, "sentencepiece: encode: %s", st.ToString().c_str());
        int bos = add_special ? s->p.bos_id() : -1, eos = add_special ? s->p.eos_id() : -1;
        grit_err rc = hf__ids_reserve(ids, v.size() + 2);
        if (rc)
            return rc;
        if (bos >= 0)
            ids->v[ids->n++] = (uint32_t)bos;
        for (int id : v)
            ids->v[ids->n++] = (uint32_t)id;
        (void)eos; /* SentencePiece's default (and Llama's): BOS only */
        return GRIT_OK;
    } catch (...) {
        return grit_errf(GRIT_ENOMEM, "sentencepiece: out of memory");
    }
}

extern "C" const char *spm_piece(const spm *s, uint32_t id, size_t *len)
{
    if (id >= (uint32_t)s->p.GetPieceSize())
        return NULL;
    const std::string &p = s->p.IdToPiece((int)id);
    *len = p.size();
    return p.data();
}

extern "C" int spm_piece_id(const spm *s, const char *piece, size_t len, uint32_t *id)
{
    try {
        std::string p(piece, len);
        int i = s->p.PieceToId(p);
        if (i < 0 || (i == s->p.unk_id() && p != s->p.IdToPiece(i)))
            return 0;
        *id = (uint32_t)i;
        return 1;
    } catch (...) {
        return 0;
    }
}

extern "C" grit_err spm_decode(const spm *s, const uint32_t *ids, size_t n, char *out, size_t cap, size_t *outlen)
{
    try {
        std::vector<int> v(ids, ids + n);
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= (uint32_t)s->p.GetPieceSize())
                return grit_errf(GRIT_EINVAL, "decode: ids[%zu] = %u: not a token of this vocabulary (size %d)", i,
                                 ids[i], s->p.GetPieceSize());
        std::string d;
        auto st = s->p.Decode(v, &d);
        if (!st.ok())
            return grit_errf(GRIT_EINVAL, "sentencepiece: decode: %s", st.ToString().c_str());
        memcpy(out, d.data(), d.size() < cap ? d.size() : cap);
        *outlen = d.size();
        return GRIT_OK;
    } catch (...) {
        return grit_errf(GRIT_ENOMEM, "sentencepiece: out of memory");
    }
}
