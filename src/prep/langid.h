/*
 * langid.h - language identification behind one small interface.
 *
 * Three backends: CLD2 with its full table (default; Google's Compact
 * Language Detector 2, ~160 languages, Debian's libcld2_full), CLD2 with its
 * small table (~83 languages), both through the C shim in langid_cld2.cc,
 * and libexttextcat (pure C, n-gram profiles from /usr/share/libexttextcat). Each returns an ISO
 * 639-1 style code ("en", "pt", "zh-Hant"; "un" when unknown) and a score in
 * [0, 1]: CLD2's fraction of text in the top language (halved when CLD2 calls
 * it unreliable); for textcat 1/k when it names k candidates.
 *
 * The full table is Debian's libcld2_full: data only, whose table symbols
 * override the small ones inside libcld2 (linked first). Measured on the
 * installation guide, it returns "unknown" for 13% of Russian paragraphs
 * that the small table names; so when the full table finds no language, the
 * small one is asked (prep_langid.sh and test_langid give the accuracies).
 *
 * A langid handle belongs to one thread (textcat keeps state per handle).
 * Ownership: langid_open allocates, langid_close frees (NULL is a no-op).
 */
#ifndef GRIT_PREP_LANGID_H
#define GRIT_PREP_LANGID_H
#include <stddef.h>
#include "core/error.h"

enum { LANGID_CLD2 = 0, LANGID_TEXTCAT = 1, LANGID_CLD2_SMALL = 2 };

typedef struct langid langid;

grit_err langid_open(langid **out, int backend);
void langid_close(langid *l);
/* Classifies text[0..len) (UTF-8); code gets at most 7 chars + NUL. Only the
 * first 64 KiB are looked at. Never fails: unknown text gives "un", 0. */
void langid_detect(langid *l, const char *text, size_t len, char code[8], double *score);
/* "cld2", "cld2-small", "textcat"; langid_backend_parse: the inverse, -1 if none. */
const char *langid_backend_name(int backend);
int langid_backend_parse(const char *name);

#endif
