/* tokenize.c - parallel, order-keeping corpus tokenizer (see tokenize.h). */
#include "data/tokenize.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/progress.h"
#include "data/indexed.h"

typedef struct file_list {
    char **v;
    size_t n, cap;
} file_list;

typedef struct doc_span {
    size_t off, len;
    const char *path; /* the file it came from (owned by the file list) */
    size_t line;      /* its JSONL line, 0 for a text file */
} doc_span;

typedef struct tk_round {
    char *text; /* the round's documents, back to back */
    size_t tlen, tcap;
    doc_span *docs;
    bpe_ids *ids; /* [dcap] one per document, reused across rounds */
    size_t nd, dcap;
} tk_round;

typedef struct reader {
    const tokenize_opts *o;
    const file_list *files;
    size_t next;      /* next file to open */
    FILE *f;          /* current JSONL file, or NULL */
    const char *path; /* its name */
    size_t line_no;
    char *line;
    size_t line_cap;
    tokenize_stats *st;
} reader;

static int name_cmp(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static grit_err list_push(file_list *l, const char *path)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, sizeof *v * cap);
        if (!v)
            return grit_errf(GRIT_ENOMEM, "out of memory listing inputs");
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(path)))
        return grit_errf(GRIT_ENOMEM, "out of memory listing inputs");
    l->n++;
    return GRIT_OK;
}

static grit_err list_add(file_list *l, const char *path, uint64_t *bytes, int depth)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return grit_errf(GRIT_ENOTFOUND, "%s: %s", path, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        *bytes += (uint64_t)sb.st_size;
        return list_push(l, path);
    }
    if (!S_ISDIR(sb.st_mode))
        return grit_errf(GRIT_EINVAL, "%s: expected a file or a directory", path);
    if (depth > 64)
        return grit_errf(GRIT_EINVAL, "%s: directories nested too deep", path);
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, name_cmp);
    if (n < 0)
        return grit_errf(GRIT_EIO, "%s: %s", path, strerror(errno));
    grit_err rc = GRIT_OK;
    for (int i = 0; i < n; i++) {
        if (rc == GRIT_OK && ents[i]->d_name[0] != '.') {
            size_t len = strlen(path) + strlen(ents[i]->d_name) + 2;
            char *p = malloc(len);
            if (!p) {
                rc = grit_errf(GRIT_ENOMEM, "out of memory listing inputs");
            } else {
                snprintf(p, len, "%s/%s", path, ents[i]->d_name);
                struct stat cs;
                /* in a directory, take regular files and subdirectories only */
                if (stat(p, &cs) == 0 && (S_ISREG(cs.st_mode) || S_ISDIR(cs.st_mode)))
                    rc = list_add(l, p, bytes, depth + 1);
                free(p);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

static int is_jsonl(const tokenize_opts *o, const char *path)
{
    if (o->format != TOKENIZE_AUTO)
        return o->format == TOKENIZE_JSONL;
    size_t n = strlen(path);
    return (n >= 6 && !strcmp(path + n - 6, ".jsonl")) || (n >= 5 && !strcmp(path + n - 5, ".json"));
}

/* Makes room for `more` bytes of text and one more document. */
static grit_err round_reserve(tk_round *r, size_t more)
{
    if (r->tlen + more > r->tcap) {
        size_t cap = r->tcap ? r->tcap : 1 << 16;
        while (cap < r->tlen + more)
            cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t)
            return grit_errf(GRIT_ENOMEM, "out of memory (a document of %zu bytes)", more);
        r->text = t;
        r->tcap = cap;
    }
    if (r->nd == r->dcap) {
        size_t cap = r->dcap ? 2 * r->dcap : 1024;
        doc_span *d = realloc(r->docs, sizeof *d * cap);
        if (d)
            r->docs = d;
        bpe_ids *ids = d ? realloc(r->ids, sizeof *ids * cap) : NULL;
        if (!ids)
            return grit_errf(GRIT_ENOMEM, "out of memory");
        memset(ids + r->dcap, 0, sizeof *ids * (cap - r->dcap));
        r->ids = ids;
        r->dcap = cap;
    }
    return GRIT_OK;
}

static grit_err push_doc(reader *rd, tk_round *r, const char *s, size_t len)
{
    if (len == 0) {
        rd->st->empty_docs++;
        return GRIT_OK;
    }
    grit_err rc = round_reserve(r, len);
    if (rc != GRIT_OK)
        return rc;
    memcpy(r->text + r->tlen, s, len);
    r->docs[r->nd++] = (doc_span){r->tlen, len, rd->path, rd->line_no};
    r->tlen += len;
    return GRIT_OK;
}

/* A whole text file as one document, read straight into the round. */
static grit_err read_text_file(reader *rd, tk_round *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return grit_errf(GRIT_EIO, "%s: %s", path, strerror(errno));
    size_t start = r->tlen;
    grit_err rc = GRIT_OK;
    for (;;) {
        if ((rc = round_reserve(r, 1 << 16)) != GRIT_OK)
            break;
        size_t got = fread(r->text + r->tlen, 1, r->tcap - r->tlen, f);
        r->tlen += got;
        rd->st->bytes_done += got;
        if (got == 0) {
            if (ferror(f))
                rc = grit_errf(GRIT_EIO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc != GRIT_OK)
        return rc;
    if (r->tlen == start)
        rd->st->empty_docs++;
    else
        r->docs[r->nd++] = (doc_span){start, r->tlen - start, path, 0};
    return GRIT_OK;
}

static grit_err jsonl_line(reader *rd, tk_round *r, const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n'))
        i++;
    if (i == len)
        return GRIT_OK; /* blank line */
    json_error_t je;
    json_t *j = json_loadb(line, len, JSON_ALLOW_NUL, &je);
    const char *field = rd->o->field ? rd->o->field : "text";
    if (!j)
        return grit_errf(GRIT_EFORMAT, "%s:%zu: not valid JSON (column %d: %s)", rd->path,
                         rd->line_no, je.column, je.text);
    grit_err rc;
    json_t *v = json_is_object(j) ? json_object_get(j, field) : NULL;
    if (!json_is_object(j))
        rc = grit_errf(GRIT_EFORMAT, "%s:%zu: expected a JSON object, got %s", rd->path,
                       rd->line_no, json_is_array(j) ? "an array" : "a scalar");
    else if (!v)
        rc = grit_errf(GRIT_EFORMAT, "%s:%zu: expected a field \"%s\" (choose another with "
                                     "--field)", rd->path, rd->line_no, field);
    else if (!json_is_string(v))
        rc = grit_errf(GRIT_EFORMAT, "%s:%zu: field \"%s\": expected a string", rd->path,
                       rd->line_no, field);
    else
        rc = push_doc(rd, r, json_string_value(v), json_string_length(v));
    json_decref(j);
    return rc;
}

/* Fills r with documents up to `limit` bytes of text; r->nd == 0 at the end. */
static grit_err read_round(reader *rd, tk_round *r, size_t limit)
{
    r->tlen = 0;
    r->nd = 0;
    grit_err rc = GRIT_OK;
    while (rc == GRIT_OK && (r->nd == 0 || r->tlen < limit)) {
        if (!rd->f) {
            if (rd->next == rd->files->n)
                break;
            const char *path = rd->files->v[rd->next++];
            rd->st->files++;
            if (!is_jsonl(rd->o, path)) {
                rc = read_text_file(rd, r, path);
                continue;
            }
            if (!(rd->f = fopen(path, "rb")))
                return grit_errf(GRIT_EIO, "%s: %s", path, strerror(errno));
            rd->path = path;
            rd->line_no = 0;
        }
        ssize_t n = getline(&rd->line, &rd->line_cap, rd->f);
        if (n < 0) {
            int bad = ferror(rd->f);
            fclose(rd->f);
            rd->f = NULL;
            if (bad)
                return grit_errf(GRIT_EIO, "%s: read error", rd->path);
            continue;
        }
        rd->line_no++;
        rd->st->bytes_done += (uint64_t)n;
        rc = jsonl_line(rd, r, rd->line, (size_t)n);
    }
    return rc;
}

/* Encodes the round's documents in parallel; each gets its ids + eod. On an encoding error
 * the first failing document (in input order) is encoded again on this thread, so the
 * message is its own, and named with its file (and line). */
static grit_err encode_round(const tokenize_opts *o, tk_round *r, bpe_ctx **ctx, int nt)
{
    long nd = (long)r->nd, first_bad = nd;
    int oom = 0;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (long i = 0; i < nd; i++) {
        bpe_ctx *c = ctx[omp_get_thread_num()];
        bpe_ids *ids = &r->ids[i];
        ids->n = 0;
        const doc_span *d = &r->docs[i];
        grit_err rc = bpe_encode(c, r->text + d->off, d->len, o->encode_flags, ids);
        if (rc == GRIT_OK && ids->n == ids->cap) {
            uint32_t *v = realloc(ids->v, sizeof *v * (ids->cap + 1));
            if (v) {
                ids->v = v;
                ids->cap++;
            } else {
                rc = GRIT_ENOMEM;
            }
        }
        if (rc == GRIT_OK) {
            ids->v[ids->n++] = o->eod;
        } else if (rc == GRIT_ENOMEM) {
#pragma omp atomic write
            oom = 1;
        } else {
#pragma omp critical(tokenize_bad)
            if (i < first_bad)
                first_bad = i;
        }
    }
    if (oom)
        return grit_errf(GRIT_ENOMEM, "out of memory encoding");
    if (first_bad < nd) {
        const doc_span *d = &r->docs[first_bad];
        bpe_ids tmp = {0};
        grit_err rc = bpe_encode(ctx[0], r->text + d->off, d->len, o->encode_flags, &tmp);
        bpe_ids_free(&tmp);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", grit_errmsg());
        if (d->line)
            return grit_errf(rc, "%s:%zu: %s", d->path, d->line, msg);
        return grit_errf(rc, "%s: %s", d->path, msg);
    }
    return GRIT_OK;
}

grit_err tokenize_run(const tokenize_opts *o, tokenize_stats *st)
{
    memset(st, 0, sizeof *st);
    double t0 = now_seconds();
    int nt = o->threads > 0 ? o->threads : 1;
    size_t limit = o->round_bytes ? o->round_bytes : (size_t)nt << 22;
    file_list files = {0};
    tk_round r = {0};
    reader rd = {.o = o, .files = &files, .st = st};
    idx_writer *w = NULL;
    bpe_ctx **ctx = calloc((size_t)nt, sizeof *ctx);
    grit_err rc = ctx ? GRIT_OK : grit_errf(GRIT_ENOMEM, "out of memory");
    for (int i = 0; rc == GRIT_OK && i < o->n_inputs; i++)
        rc = list_add(&files, o->inputs[i], &st->bytes_total, 0);
    if (rc == GRIT_OK && files.n == 0)
        rc = grit_errf(GRIT_ENOTFOUND, "no input files found");
    for (int i = 0; rc == GRIT_OK && i < nt; i++)
        rc = bpe_ctx_open(&ctx[i], o->tok);
    if (rc == GRIT_OK)
        rc = idx_writer_open(&w, o->output_prefix, idx_dtype_for_vocab(bpe_vocab_size(o->tok)));
    while (rc == GRIT_OK) {
        if ((rc = read_round(&rd, &r, limit)) != GRIT_OK || r.nd == 0)
            break;
        if ((rc = encode_round(o, &r, ctx, nt)) != GRIT_OK)
            break;
        st->replaced_bytes = 0;
        for (int i = 0; i < nt; i++)
            st->replaced_bytes += bpe_ctx_replaced(ctx[i]);
        for (size_t i = 0; rc == GRIT_OK && i < r.nd; i++) {
            rc = idx_writer_add(w, r.ids[i].v, r.ids[i].n);
            if (rc == GRIT_OK)
                rc = idx_writer_end_doc(w);
            st->tokens += r.ids[i].n;
        }
        st->docs += r.nd;
        st->seconds = now_seconds() - t0;
        if (rc == GRIT_OK && o->on_progress)
            o->on_progress(o->arg, st);
    }
    if (w) {
        if (rc == GRIT_OK)
            rc = idx_writer_finish(w);
        else
            idx_writer_abort(w);
    }
    st->seconds = now_seconds() - t0;
    if (rd.f)
        fclose(rd.f);
    free(rd.line);
    for (size_t i = 0; i < r.dcap; i++)
        bpe_ids_free(&r.ids[i]);
    free(r.ids);
    free(r.docs);
    free(r.text);
    for (int i = 0; ctx && i < nt; i++)
        bpe_ctx_close(ctx[i]);
    free(ctx);
    for (size_t i = 0; i < files.n; i++)
        free(files.v[i]);
    free(files.v);
    return rc;
}
