/*
 * prep_cfg.c - grit prep's configuration: defaults, the JSON file, presets.
 * Every field is checked with jcfg (unknown keys are errors, ranges are
 * inclusive, messages name file:line:col and the dotted field).
 */
#include <stdlib.h>
#include <string.h>

#include "core/jcfg.h"
#include "prep/langid.h"
#include "prep/prep.h"
#include "prep/reader.h"

void prep_cfg_default(prep_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->threads = 2;
    c->files_per_shard = 64;
    c->langid_backend = LANGID_CLD2;
    static const char *const eu[] = {"en", "de", "es", "fr", "it", "pt", "pl", "nl", "ro",
                                     "sv", "cs", NULL};
    for (int i = 0; eu[i]; i++)
        strcpy(c->langs[c->n_langs++], eu[i]);
    c->min_lang_score = 0.65;
    c->curated_fraction = -1;
    c->extract.max_link_density = 0.5;
    c->extract.max_depth = EXTRACT_MAX_DEPTH;
    c->extract.max_bytes = EXTRACT_MAX_BYTES;
    filter_cfg_default(&c->filters);
    c->url_dedup = c->exact_dedup = 1;
    c->mh_bands = 20;
    c->mh_rows = 450;
    c->mh_ngram = 5;
}

grit_err prep_cfg_minhash_preset(prep_cfg *c, const char *name)
{
    if (!strcmp(name, "refinedweb")) {
        c->mh_bands = 20;
        c->mh_rows = 450;
    } else if (!strcmp(name, "cheap")) {
        c->mh_bands = 14;
        c->mh_rows = 8;
    } else if (!strcmp(name, "off")) {
        c->mh_bands = 0;
    } else {
        return grit_errf(GRIT_EINVAL, "minhash preset: expected refinedweb, cheap or off, "
                         "got '%s'", name);
    }
    return GRIT_OK;
}

static void source_free(prep_source *s)
{
    for (int i = 0; i < s->n_inputs; i++)
        free(s->inputs[i]);
    free(s->inputs);
    free(s->name);
    free(s->field);
}

void prep_cfg_free(prep_cfg *c)
{
    for (int i = 0; i < c->n_sources; i++)
        source_free(&c->sources[i]);
    free(c->sources);
    free(c->output);
    free(c->publish);
    free(c->url_blocklist);
    free(c->tokenizer);
    free(c->eod);
    memset(c, 0, sizeof *c);
}

static prep_source *add_source(prep_cfg *c, const char *name)
{
    prep_source *p = realloc(c->sources, (size_t)(c->n_sources + 1) * sizeof *p);
    if (!p)
        return NULL;
    c->sources = p;
    prep_source *s = &p[c->n_sources];
    memset(s, 0, sizeof *s);
    s->weight = 1.0;
    s->name = strdup(name);
    if (!s->name)
        return NULL;
    c->n_sources++;
    return s;
}

static grit_err add_input(prep_source *s, const char *path)
{
    char **p = realloc(s->inputs, (size_t)(s->n_inputs + 1) * sizeof *p);
    if (!p)
        return GRIT_ENOMEM;
    s->inputs = p;
    if (!(p[s->n_inputs] = strdup(path)))
        return GRIT_ENOMEM;
    s->n_inputs++;
    return GRIT_OK;
}

grit_err prep_cfg_add_input(prep_cfg *c, const char *path)
{
    prep_source *s = NULL;
    for (int i = 0; i < c->n_sources; i++)
        if (!strcmp(c->sources[i].name, "default"))
            s = &c->sources[i];
    if (!s && !(s = add_source(c, "default")))
        return GRIT_ENOMEM;
    return add_input(s, path);
}

static grit_err set_str(char **dst, const char *v)
{
    if (!v)
        return GRIT_OK;
    char *d = strdup(v);
    if (!d)
        return GRIT_ENOMEM;
    free(*dst);
    *dst = d;
    return GRIT_OK;
}

#define TRY(x)                      \
    do {                            \
        if ((rc = (x)) != GRIT_OK)  \
            goto out;               \
    } while (0)

static grit_err load_inputs(jcfg *j, json_t *arr, const char *path, prep_source *s)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return jcfg_fail(j, path, "expected a non-empty array of file or directory paths");
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v) || !*json_string_value(v))
            return jcfg_fail(j, path, "entry %zu: expected a non-empty string", i);
        if (add_input(s, json_string_value(v)) != GRIT_OK)
            return GRIT_ENOMEM;
    }
    return GRIT_OK;
}

static int fmt_of_name(const char *s)
{
    return !strcmp(s, "warc") ? PREP_FMT_WARC : !strcmp(s, "html") ? PREP_FMT_HTML
         : !strcmp(s, "text") ? PREP_FMT_TEXT : !strcmp(s, "jsonl") ? PREP_FMT_JSONL
                               : PREP_FMT_AUTO;
}

static grit_err load_filters(jcfg *j, json_t *f, prep_cfg *c)
{
    static const char *const keys[] = {
        "disable", "min_words", "max_words", "min_mean_word_length", "max_mean_word_length",
        "max_symbol_ratio", "max_bullet_lines", "max_ellipsis_lines", "min_alpha_words",
        "min_stop_words", "max_dup_lines", "max_dup_paragraphs", "max_dup_line_chars",
        "max_dup_paragraph_chars", "max_top_ngram", "max_dup_ngram", "max_line_corrections",
        NULL};
    grit_err rc;
    filter_cfg *fc = &c->filters;
    const char *p = "filters";
    TRY(jcfg_only(j, f, p, keys));
    TRY(jcfg_int(j, f, p, "min_words", 0, 100000000, &fc->min_words));
    TRY(jcfg_int(j, f, p, "max_words", 0, 100000000, &fc->max_words));
    TRY(jcfg_num(j, f, p, "min_mean_word_length", 0, 1000, &fc->min_mean_word_len));
    TRY(jcfg_num(j, f, p, "max_mean_word_length", 0, 1000, &fc->max_mean_word_len));
    TRY(jcfg_num(j, f, p, "max_symbol_ratio", 0, 1000, &fc->max_symbol_ratio));
    TRY(jcfg_num(j, f, p, "max_bullet_lines", 0, 1, &fc->max_bullet_lines));
    TRY(jcfg_num(j, f, p, "max_ellipsis_lines", 0, 1, &fc->max_ellipsis_lines));
    TRY(jcfg_num(j, f, p, "min_alpha_words", 0, 1, &fc->min_alpha_words));
    TRY(jcfg_int(j, f, p, "min_stop_words", 0, 1000000, &fc->min_stop_words));
    TRY(jcfg_num(j, f, p, "max_dup_lines", 0, 1, &fc->max_dup_lines));
    TRY(jcfg_num(j, f, p, "max_dup_paragraphs", 0, 1, &fc->max_dup_paragraphs));
    TRY(jcfg_num(j, f, p, "max_dup_line_chars", 0, 1, &fc->max_dup_line_chars));
    TRY(jcfg_num(j, f, p, "max_dup_paragraph_chars", 0, 1, &fc->max_dup_paragraph_chars));
    TRY(jcfg_num(j, f, p, "max_line_corrections", 0, 1, &fc->max_line_corrections));
    static const struct { const char *key; int n; } arrs[] = {{"max_top_ngram", 3},
                                                              {"max_dup_ngram", 6}};
    for (int a = 0; a < 2; a++) {
        json_t *v = json_object_get(f, arrs[a].key);
        if (!v)
            continue;
        char path[64];
        snprintf(path, sizeof path, "filters.%s", arrs[a].key);
        if (!json_is_array(v) || (int)json_array_size(v) != arrs[a].n)
            return jcfg_fail(j, path, "expected an array of %d numbers in [0, 1]%s",
                             arrs[a].n, a ? " (n = 5..10)" : " (n = 2, 3, 4)");
        for (int k = 0; k < arrs[a].n; k++) {
            json_t *e = json_array_get(v, (size_t)k);
            double x = json_is_number(e) ? json_number_value(e) : -1;
            if (x < 0 || x > 1)
                return jcfg_fail(j, path, "entry %d: expected a number in [0, 1]", k);
            (a ? fc->max_dup_ngram : fc->max_top_ngram)[k] = x;
        }
    }
    json_t *d = json_object_get(f, "disable");
    if (d) {
        if (!json_is_array(d))
            return jcfg_fail(j, "filters.disable", "expected an array of filter names");
        size_t i;
        json_t *v;
        json_array_foreach(d, i, v) {
            int id = json_is_string(v) ? filter_by_name(json_string_value(v)) : -1;
            if (id < 0) {
                char list[512] = "";
                for (int k = 0; k < FILT_COUNT; k++) {
                    size_t n = strlen(list);
                    snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", filter_name(k));
                }
                return jcfg_fail(j, "filters.disable", "entry %zu: expected one of %s", i,
                                 list);
            }
            fc->enabled &= ~(1u << id);
        }
    }
    rc = GRIT_OK;
out:
    return rc;
}

grit_err prep_cfg_load(prep_cfg *c, const char *path)
{
    static const char *const top[] = {"output", "threads", "files_per_shard", "inputs",
                                      "sources", "langid", "extract", "filters", "dedup",
                                      "tokenizer", "eod", "url_blocklist", "mix", NULL};
    static const char *const fmts[] = {"auto", "warc", "html", "text", "jsonl", NULL};
    jcfg j;
    grit_err rc = jcfg_open(&j, path);
    if (rc != GRIT_OK)
        return rc;
    json_t *r = j.root, *o;
    const char *s = NULL;
    long v;
    TRY(jcfg_only(&j, r, "", top));
    s = NULL;
    TRY(jcfg_str(&j, r, "", "output", NULL, &s));
    TRY(set_str(&c->output, s));
    s = NULL;
    TRY(jcfg_str(&j, r, "", "tokenizer", NULL, &s));
    TRY(set_str(&c->tokenizer, s));
    s = NULL;
    TRY(jcfg_str(&j, r, "", "url_blocklist", NULL, &s));
    TRY(set_str(&c->url_blocklist, s));
    s = NULL;
    TRY(jcfg_str(&j, r, "", "eod", NULL, &s));
    TRY(set_str(&c->eod, s));
    v = c->threads;
    TRY(jcfg_int(&j, r, "", "threads", 1, 1024, &v));
    c->threads = (int)v;
    v = c->files_per_shard;
    TRY(jcfg_int(&j, r, "", "files_per_shard", 1, 1000000, &v));
    c->files_per_shard = (int)v;
    if ((o = json_object_get(r, "inputs"))) {
        prep_source *src = NULL;
        for (int i = 0; i < c->n_sources; i++)
            if (!strcmp(c->sources[i].name, "default"))
                src = &c->sources[i];
        if (!src && !(src = add_source(c, "default"))) {
            rc = GRIT_ENOMEM;
            goto out;
        }
        TRY(load_inputs(&j, o, "inputs", src));
    }
    if ((o = json_object_get(r, "sources"))) {
        if (!json_is_array(o) || !json_array_size(o)) {
            rc = jcfg_fail(&j, "sources", "expected a non-empty array of objects");
            goto out;
        }
        size_t i;
        json_t *e;
        json_array_foreach(o, i, e) {
            char p[64];
            snprintf(p, sizeof p, "sources[%zu]", i);
            static const char *const sk[] = {"name", "inputs", "format", "field", "weight",
                                             "kind", NULL};
            static const char *const kinds[] = {"web", "curated", NULL};
            if (!json_is_object(e)) {
                rc = jcfg_fail(&j, p, "expected an object");
                goto out;
            }
            TRY(jcfg_only(&j, e, p, sk));
            const char *name = NULL;
            TRY(jcfg_str(&j, e, p, "name", NULL, &name));
            char dflt[32];
            snprintf(dflt, sizeof dflt, "source%zu", i);
            prep_source *src = add_source(c, name ? name : dflt);
            if (!src) {
                rc = GRIT_ENOMEM;
                goto out;
            }
            char ip[80];
            snprintf(ip, sizeof ip, "%s.inputs", p);
            TRY(load_inputs(&j, json_object_get(e, "inputs"), ip, src));
            const char *f = NULL;
            TRY(jcfg_str(&j, e, p, "format", fmts, &f));
            if (f)
                src->format = fmt_of_name(f);
            const char *fld = NULL;
            TRY(jcfg_str(&j, e, p, "field", NULL, &fld));
            TRY(set_str(&src->field, fld));
            TRY(jcfg_num(&j, e, p, "weight", 0, 1000, &src->weight));
            const char *kd = NULL;
            TRY(jcfg_str(&j, e, p, "kind", kinds, &kd));
            if (kd)
                src->curated = !strcmp(kd, "curated");
        }
    }
    if ((o = json_object_get(r, "mix"))) {
        static const char *const mk[] = {"curated_fraction", NULL};
        TRY(jcfg_only(&j, o, "mix", mk));
        TRY(jcfg_num(&j, o, "mix", "curated_fraction", 0, 1, &c->curated_fraction));
    }
    if ((o = json_object_get(r, "langid"))) {
        static const char *const lk[] = {"backend", "languages", "min_score", NULL};
        static const char *const be[] = {"cld2", "cld2-small", "textcat", NULL};
        TRY(jcfg_only(&j, o, "langid", lk));
        s = NULL;
        TRY(jcfg_str(&j, o, "langid", "backend", be, &s));
        if (s)
            c->langid_backend = langid_backend_parse(s);
        TRY(jcfg_num(&j, o, "langid", "min_score", 0, 1, &c->min_lang_score));
        json_t *l = json_object_get(o, "languages");
        if (l) {
            if (json_is_string(l) && !strcmp(json_string_value(l), "all")) {
                c->n_langs = 0;
            } else if (json_is_array(l) && json_array_size(l) <= PREP_MAX_LANGS) {
                c->n_langs = 0;
                size_t i;
                json_t *e;
                json_array_foreach(l, i, e) {
                    if (!json_is_string(e) || !*json_string_value(e) ||
                        strlen(json_string_value(e)) > 7) {
                        rc = jcfg_fail(&j, "langid.languages", "entry %zu: expected a language "
                                       "code such as \"en\" (at most 7 characters)", i);
                        goto out;
                    }
                    strcpy(c->langs[c->n_langs++], json_string_value(e));
                }
            } else {
                rc = jcfg_fail(&j, "langid.languages", "expected \"all\" or an array of at "
                               "most %d language codes", PREP_MAX_LANGS);
                goto out;
            }
        }
    }
    if ((o = json_object_get(r, "extract"))) {
        static const char *const ek[] = {"max_link_density", "max_depth", "max_bytes", NULL};
        TRY(jcfg_only(&j, o, "extract", ek));
        TRY(jcfg_num(&j, o, "extract", "max_link_density", 0.01, 1, &c->extract.max_link_density));
        long depth = c->extract.max_depth, bytes = (long)c->extract.max_bytes;
        TRY(jcfg_int(&j, o, "extract", "max_depth", 16, 100000, &depth));
        TRY(jcfg_int(&j, o, "extract", "max_bytes", 4096, 1L << 30, &bytes));
        c->extract.max_depth = (int)depth;
        c->extract.max_bytes = (size_t)bytes;
    }
    if ((o = json_object_get(r, "filters"))) {
        if (!json_is_object(o)) {
            rc = jcfg_fail(&j, "filters", "expected an object");
            goto out;
        }
        TRY(load_filters(&j, o, c));
    }
    if ((o = json_object_get(r, "dedup"))) {
        static const char *const dk[] = {"url", "exact", "minhash", "bands", "rows", "ngram",
                                         NULL};
        static const char *const presets[] = {"refinedweb", "cheap", "off", NULL};
        TRY(jcfg_only(&j, o, "dedup", dk));
        bool b = c->url_dedup;
        TRY(jcfg_bool(&j, o, "dedup", "url", &b));
        c->url_dedup = b;
        b = c->exact_dedup;
        TRY(jcfg_bool(&j, o, "dedup", "exact", &b));
        c->exact_dedup = b;
        s = NULL;
        TRY(jcfg_str(&j, o, "dedup", "minhash", presets, &s));
        if (s)
            TRY(prep_cfg_minhash_preset(c, s));
        v = c->mh_bands;
        TRY(jcfg_int(&j, o, "dedup", "bands", 0, 4096, &v));
        c->mh_bands = (int)v;
        v = c->mh_rows;
        TRY(jcfg_int(&j, o, "dedup", "rows", 1, 4096, &v));
        c->mh_rows = (int)v;
        v = c->mh_ngram;
        TRY(jcfg_int(&j, o, "dedup", "ngram", 1, 64, &v));
        c->mh_ngram = (int)v;
    }
    rc = GRIT_OK;
out:
    jcfg_close(&j);
    return rc;
}
