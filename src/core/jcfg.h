/*
 * jcfg.h - typed, position-aware reading of JSON configuration files.
 *
 * jansson parses the file; jcfg adds what users need when a value is wrong:
 * every error names the file, the line:column of the offending key, the
 * dotted field name and what was expected, e.g.
 *
 *   run.json:7:5: field 'optim.lr': expected a number > 0, got -0.1
 *
 * jansson does not keep positions of values, so jcfg_locate() re-scans the
 * original text for the key path (a small tokenizer that understands
 * strings, escapes, nesting and arrays). Getters leave *out untouched when
 * the key is absent, so callers preload defaults.
 */
#ifndef GRIT_CORE_JCFG_H
#define GRIT_CORE_JCFG_H

#include <jansson.h>
#include <stdbool.h>

#include "core/error.h"

typedef struct jcfg {
    char *file;   /* path as given, for messages (owned) */
    char *text;   /* the file's bytes (owned) */
    json_t *root; /* parsed document, an object (owned) */
} jcfg;

/* Parses path; the root must be an object. On error *c is zeroed. */
grit_err jcfg_open(jcfg *c, const char *path);
/* Parses an in-memory document; name is used in messages. */
grit_err jcfg_open_string(jcfg *c, const char *name, const char *text);
void jcfg_close(jcfg *c);

/* Finds the line and column (1-based) of the key at dotted path (array elements as
 * "list[2].key"); 0 if not found. jcfg_fail() falls back to the nearest enclosing
 * object or element when the key itself is absent. */
void jcfg_locate(const jcfg *c, const char *path, int *line, int *col);

/* Records "file:line:col: field 'path': <message>" and returns GRIT_ECONFIG. */
grit_err jcfg_fail(const jcfg *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Rejects keys of obj (at prefix) not in the NULL-terminated allowed list. */
grit_err jcfg_only(const jcfg *c, json_t *obj, const char *prefix, const char *const *allowed);

/* Getters; key absent -> GRIT_OK with *out unchanged. Ranges are inclusive. */
grit_err jcfg_int(const jcfg *c, json_t *obj, const char *prefix, const char *key,
                  long lo, long hi, long *out);
grit_err jcfg_num(const jcfg *c, json_t *obj, const char *prefix, const char *key,
                  double lo, double hi, double *out);
grit_err jcfg_bool(const jcfg *c, json_t *obj, const char *prefix, const char *key, bool *out);
/* choices may be NULL (any string); *out points into the document. */
grit_err jcfg_str(const jcfg *c, json_t *obj, const char *prefix, const char *key,
                  const char *const *choices, const char **out);
/* An object member (absent -> *out = NULL). */
grit_err jcfg_obj(const jcfg *c, json_t *obj, const char *prefix, const char *key, json_t **out);

#endif
