/* langid.c - see langid.h. */
#include "prep/langid.h"

#include <libexttextcat/textcat.h>
#include <stdlib.h>
#include <string.h>

int prep__cld2_detect(int small, const char *text, int len, char code[8], double *score);
const char *prep__cld2_small_load(void);

#define LANGID_MAX_BYTES (64 << 10)
#define TEXTCAT_CONF "/usr/share/libexttextcat/fpdb.conf"
#define TEXTCAT_PREFIX "/usr/share/libexttextcat/"

struct langid {
    int backend;
    int small_ok; /* cld2: the small table is loaded (the fallback) */
    void *tc;     /* textcat handle */
};

const char *langid_backend_name(int backend)
{
    return backend == LANGID_TEXTCAT ? "textcat" : backend == LANGID_CLD2_SMALL ? "cld2-small"
                                                                              : "cld2";
}

int langid_backend_parse(const char *name)
{
    static const int all[] = {LANGID_CLD2, LANGID_CLD2_SMALL, LANGID_TEXTCAT};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, langid_backend_name(all[i])))
            return all[i];
    return -1;
}

grit_err langid_open(langid **out, int backend)
{
    *out = NULL;
    langid *l = calloc(1, sizeof *l);
    if (!l)
        return GRIT_ENOMEM;
    l->backend = backend;
    if (backend == LANGID_CLD2)
        l->small_ok = prep__cld2_small_load() == NULL;
    if (backend == LANGID_CLD2_SMALL) {
        const char *why = prep__cld2_small_load();
        if (why) {
            free(l);
            return grit_errf(GRIT_ENOTFOUND, "langid cld2-small: %s", why);
        }
    }
    if (backend == LANGID_TEXTCAT) {
        l->tc = special_textcat_Init(TEXTCAT_CONF, TEXTCAT_PREFIX);
        if (!l->tc) {
            free(l);
            return grit_errf(GRIT_ENOTFOUND, "%s: cannot load libexttextcat's language "
                             "profiles (install libexttextcat-data)", TEXTCAT_CONF);
        }
    }
    *out = l;
    return GRIT_OK;
}

void langid_close(langid *l)
{
    if (!l)
        return;
    if (l->tc)
        textcat_Done(l->tc);
    free(l);
}

/* "[en--utf8][de--utf8]" -> first code "en", k = 2. */
static void textcat_parse(const char *res, char code[8], double *score)
{
    strcpy(code, "un");
    *score = 0;
    if (!res || res[0] != '[')
        return;
    int k = 0;
    for (const char *p = res; *p; p++)
        k += *p == '[';
    const char *s = res + 1;
    size_t n = strcspn(s, "-]");
    if (n == 0 || n > 7)
        return;
    memcpy(code, s, n);
    code[n] = 0;
    *score = 1.0 / k;
}

void langid_detect(langid *l, const char *text, size_t len, char code[8], double *score)
{
    if (len > LANGID_MAX_BYTES) {
        len = LANGID_MAX_BYTES;
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
            len--; /* do not cut a UTF-8 sequence */
    }
    if (l->backend == LANGID_TEXTCAT) {
        textcat_parse(textcat_Classify(l->tc, text, len), code, score);
        return;
    }
    int small = l->backend == LANGID_CLD2_SMALL;
    if (prep__cld2_detect(small, text, (int)len, code, score))
        return;
    /* the full table finds no language: ask the small one (see langid.h) */
    if (!small && l->small_ok && prep__cld2_detect(1, text, (int)len, code, score))
        return;
    strcpy(code, "un");
    *score = 0;
}
