// langid_cld2.cc - the C shim over CLD2's C++ API (the only C++ in grit).
// One function, extern "C"; CLD2 keeps no per-call state, so it is safe to
// call from several threads at once. Exceptions never cross the boundary.
#include <cstdio>  // compact_lang_det.h uses FILE without including it
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>
#include <string.h>

extern "C" int prep__cld2_detect(const char *text, int len, char code[8], double *score);

// Returns 1 with code ("en", "pt", "zh-Hant", ...) and score (the fraction of
// text bytes in the top language, 0..1, halved when CLD2 says unreliable);
// 0 when CLD2 finds no language.
extern "C" int prep__cld2_detect(const char *text, int len, char code[8], double *score)
{
    try {
        CLD2::Language lang3[3];
        int percent3[3];
        int text_bytes = 0;
        bool reliable = false;
        double norm3[3];
        int valid = 0;
        CLD2::CLDHints hints = {NULL, NULL, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
        // The checking entry point: CLD2's fast path reads out of bounds on
        // bytes that are not interchange-valid UTF-8 (e.g. C0 controls).
        CLD2::Language l = CLD2::ExtDetectLanguageSummaryCheckUTF8(
            text, len, true, &hints, 0, lang3, percent3, norm3, NULL, &text_bytes, &reliable,
            &valid);
        if (valid < len && valid > 0)
            l = CLD2::ExtDetectLanguageSummaryCheckUTF8(text, valid, true, &hints, 0, lang3,
                                                        percent3, norm3, NULL, &text_bytes,
                                                        &reliable, &valid);
        if (l == CLD2::UNKNOWN_LANGUAGE || l == CLD2::TG_UNKNOWN_LANGUAGE) {
            code[0] = 0;
            *score = 0;
            return 0;
        }
        const char *c = CLD2::LanguageCode(l);
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
