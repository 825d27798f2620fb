/*
 * prep_report.c - grit prep's final report: sums every marker's statistics
 * (so a resumed run reports the whole corpus, not just its own part),
 * writes report.json durably and prints the table.
 */
#include <stdio.h>
#include <string.h>

#include "core/fsutil.h"
#include "prep/prep_internal.h"

/* ---- report --------------------------------------------------------------- */

grit_err prep__report(run *r, double wall)
{
    json_t *all = json_object();
    grit_err rc = GRIT_OK;
    if (!all)
        return GRIT_ENOMEM;
    for (size_t s = 0; s < r->pl.n_shards; s++) {
        for (int k = 0; k < 2; k++) {
            char p[4096];
            prep__pathf(p, sizeof p, r, k ? "done/tokenize.%05zu.json" : "done/docs.%05zu.json", s);
            json_error_t je;
            json_t *o = json_load_file(p, 0, &je);
            if (!o) {
                json_decref(all);
                return grit_errf(GRIT_EFORMAT, "%s: %s", p, je.text);
            }
            json_object_del(o, "kept");
            json_object_del(o, "files");
            prep__jsum(all, o);
            json_decref(o);
        }
    }
    char p[4096];
    prep__pathn(p, sizeof p, r, "done/dedup.json");
    json_error_t je;
    json_t *o = json_load_file(p, 0, &je);
    if (!o) {
        json_decref(all);
        return grit_errf(GRIT_EFORMAT, "%s: %s", p, je.text);
    }
    /* memory per rank (of the run that did the dedup) goes under "run" with
     * the other facts that depend on how the work was spread, not on the data */
    json_t *ranks = json_incref(json_object_get(o, "ranks"));
    prep__jsum(all, o);
    json_decref(o);
    json_t *run_o = json_pack("{s:I, s:f, s:i, s:i, s:s, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}}",
                              "shards", (json_int_t)r->pl.n_shards, "wall_seconds", wall,
                              "threads", r->c->threads, "ranks", r->size, "langid",
                              langid_backend_name(r->c->langid_backend), "units_run", "docs",
                              (json_int_t)r->ran[0], "dedup", (json_int_t)r->ran[1], "tokenize",
                              (json_int_t)r->ran[2], "units_skipped", "docs",
                              (json_int_t)r->skipped[0], "dedup", (json_int_t)r->skipped[1],
                              "tokenize", (json_int_t)r->skipped[2]);
    if (run_o && ranks)
        json_object_set(run_o, "dedup_memory", ranks);
    json_decref(ranks);
    json_object_set_new(all, "run", run_o);
    /* the mix after dedup: tokens (each document once) by kind of source */
    {
        double kt[2] = {0, 0};
        json_t *srcs = json_object_get(all, "sources");
        for (int i = 0; srcs && i < r->c->n_sources; i++) {
            json_t *x = json_object_get(srcs, r->c->sources[i].name);
            if (!x)
                continue;
            json_object_set_new(x, "kind", json_string(r->c->sources[i].curated ? "curated"
                                                                                : "web"));
            json_t *tk = json_object_get(x, "tokens");
            kt[r->c->sources[i].curated] +=
                json_number_value(tk ? tk : json_object_get(x, "bytes"));
        }
        json_t *mix = json_pack("{s:s, s:f, s:f, s:f}", "unit",
                                r->tok ? "tokens" : "bytes", "web", kt[0], "curated", kt[1],
                                "curated_fraction",
                                kt[0] + kt[1] > 0 ? kt[1] / (kt[0] + kt[1]) : 0.0);
        if (mix && r->c->curated_fraction >= 0)
            json_object_set_new(mix, "target_curated_fraction",
                                json_real(r->c->curated_fraction));
        if (mix)
            json_object_set_new(all, "mix", mix);
    }
    prep__pathn(p, sizeof p, r, "report.json");
    rc = prep__write_json(p, all);
    if (rc == GRIT_OK && !r->c->quiet) {
        static const char *const order[] = {"read", "url", "extract", "langid", "filter",
                                            "signature", "dedup", "tokenize", NULL};
        json_t *sts = json_object_get(all, "stages");
        double total = 0;
        for (int i = 0; order[i]; i++)
            total += json_number_value(json_object_get(json_object_get(sts, order[i]),
                                                       "seconds"));
        fprintf(stderr, "\n%-10s %10s %10s %10s %10s %9s %10s %9s %6s\n", "stage", "docs in",
                "docs out", "MB in", "MB out", "seconds", "docs/s", "MB/s", "time");
        for (int i = 0; order[i]; i++) {
            json_t *x = json_object_get(sts, order[i]);
            if (!x)
                continue;
#define G(k) json_number_value(json_object_get(x, k))
            double sec = G("seconds");
            fprintf(stderr, "%-10s %10.0f %10.0f %10.2f %10.2f %9.2f %10.0f %9.2f %5.1f%%\n",
                    order[i], G("docs_in"), G("docs_out"), G("bytes_in") / 1e6,
                    G("bytes_out") / 1e6, sec, sec > 0 ? G("docs_in") / sec : 0,
                    sec > 0 ? G("bytes_in") / 1e6 / sec : 0,
                    total > 0 ? 100 * sec / total : 0);
#undef G
        }
        const char *k;
        json_t *v;
        fprintf(stderr, "drops:");
        json_object_foreach(json_object_get(all, "drops"), k, v)
            fprintf(stderr, " %s %lld", k, (long long)json_integer_value(v));
        fprintf(stderr, "\nlanguages:");
        json_object_foreach(json_object_get(all, "languages"), k, v)
            fprintf(stderr, " %s %lld", k, (long long)json_integer_value(v));
        fprintf(stderr, "\nnear-duplicate clusters (size: count):");
        json_object_foreach(json_object_get(all, "clusters"), k, v)
            fprintf(stderr, " %s: %lld", k, (long long)json_integer_value(v));
        json_t *outp = json_object_get(all, "output");
        fprintf(stderr, "\ntokens: %lld", (long long)json_integer_value(json_object_get(outp,
                                                                                     "tokens")));
        long long rep = json_integer_value(json_object_get(outp, "replaced_utf8_bytes"));
        if (rep)
            fprintf(stderr, " (%lld bytes of invalid UTF-8 tokenized as U+FFFD)", rep);
        fprintf(stderr, "; report: %s\n", p);
    }
    json_decref(all);
    return rc;
}
