// langid_cld2.cc - the C shim over CLD2's C++ API (the only C++ in grit).
//
// Two tables. Debian ships CLD2's code in libcld2.so with its small table
// (~83 languages) and the full table (~160 languages) as data alone in
// libcld2_full.so, whose symbols override the small table's when it comes
// first in the link order (CMakeLists.txt links it so: full is what grit's
// own namespace sees). The small table is loaded on demand as a second,
// isolated copy of libcld2.so (dlmopen into a new link-map namespace, where
// nothing overrides its tables); its two entry points are found by the
// mangled names that dladdr reports for the linked ones, so no C++ name is
// spelled out here.
//
// CLD2 keeps no per-call state, so either copy may be called from several
// threads at once. Exceptions never cross the boundary.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cstdio>  // compact_lang_det.h uses FILE without including it
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

extern "C" int prep__cld2_detect(int small, const char *text, int len, char code[8],
                                 double *score);
extern "C" const char *prep__cld2_small_load(void);

typedef CLD2::Language (*detect_fn)(const char *, int, bool, const CLD2::CLDHints *, int,
                                    CLD2::Language *, int *, double *,
                                    CLD2::ResultChunkVector *, int *, bool *, int *);
typedef const char *(*code_fn)(CLD2::Language);

static pthread_once_t small_once = PTHREAD_ONCE_INIT;
static detect_fn small_detect;
static code_fn small_code;
static char small_err[512];

static void *sym_like(void *h, void *linked)
{
    Dl_info info;
    if (!dladdr(linked, &info) || !info.dli_sname)
        return NULL;
    return dlsym(h, info.dli_sname);
}

static void small_init(void)
{
    void *h = dlmopen(LM_ID_NEWLM, "libcld2.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(small_err, sizeof small_err, "cannot load CLD2's small table (libcld2.so.0): %s",
                 dlerror());
        return;
    }
    small_detect = (detect_fn)sym_like(h, (void *)&CLD2::ExtDetectLanguageSummaryCheckUTF8);
    small_code = (code_fn)sym_like(h, (void *)&CLD2::LanguageCode);
    if (!small_detect || !small_code)
        snprintf(small_err, sizeof small_err, "libcld2.so.0: CLD2's entry points not found");
}

// NULL when the small table is usable, else why not.
extern "C" const char *prep__cld2_small_load(void)
{
    pthread_once(&small_once, small_init);
    return small_detect && small_code ? NULL : small_err;
}

// Returns 1 with code ("en", "pt", "zh-Hant", ...) and score (the fraction of
// text bytes in the top language, 0..1, halved when CLD2 says unreliable);
// 0 when CLD2 finds no language. small: the small table (prep__cld2_small_load
// must have succeeded).
extern "C" int prep__cld2_detect(int small, const char *text, int len, char code[8],
                                 double *score)
{
    try {
        detect_fn detect = small ? small_detect : &CLD2::ExtDetectLanguageSummaryCheckUTF8;
        code_fn lcode = small ? small_code : &CLD2::LanguageCode;
        CLD2::Language lang3[3];
        int percent3[3];
        int text_bytes = 0;
        bool reliable = false;
        double norm3[3];
        int valid = 0;
        CLD2::CLDHints hints = {NULL, NULL, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
        // The checking entry point: CLD2's fast path reads out of bounds on
        // bytes that are not interchange-valid UTF-8 (e.g. C0 controls).
        CLD2::Language l = detect(text, len, true, &hints, 0, lang3, percent3, norm3, NULL,
                                  &text_bytes, &reliable, &valid);
        if (valid < len && valid > 0)
            l = detect(text, valid, true, &hints, 0, lang3, percent3, norm3, NULL, &text_bytes,
                       &reliable, &valid);
        if (l == CLD2::UNKNOWN_LANGUAGE || l == CLD2::TG_UNKNOWN_LANGUAGE) {
            code[0] = 0;
            *score = 0;
            return 0;
        }
        const char *c = lcode(l);
        strncpy(code, c ? c : "un", 7);
        code[7] = 0;
        double s = lang3[0] == l ? percent3[0] / 100.0 : 0.0;
        *score = reliable ? s : s / 2;
        return 1;
    } catch (...) {
        code[0] = 0;
        *score = 0;
        return 0;
    }
}
