/*
 * idx_tool.c - grit-idx-tool: a text face on src/data/indexed for the
 * Megatron cross-check (run_indexed.sh).
 *
 *   grit-idx-tool write SPEC PREFIX DTYPE   builds PREFIX.{idx,bin} from SPEC
 *   grit-idx-tool dump PREFIX               prints the dataset as a SPEC
 *
 * SPEC: one line per event, "S t1 t2 ..." adds a sequence, "D" ends a
 * document. dump prints sequences after the last doc_idx entry without a D.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/indexed.h"

static int do_write(const char *spec, const char *prefix, int dtype)
{
    FILE *f = fopen(spec, "r");
    if (!f) {
        perror(spec);
        return 1;
    }
    idx_writer *w;
    if (idx_writer_open(&w, prefix, dtype)) {
        fprintf(stderr, "idx-tool: %s\n", grit_errmsg());
        fclose(f);
        return 1;
    }
    size_t cap = 1 << 16, n;
    uint32_t *tok = malloc(cap * sizeof *tok);
    char *line = NULL;
    size_t lcap = 0;
    int rc = 0;
    while (!rc && getline(&line, &lcap, f) > 0) {
        if (line[0] == 'D') {
            rc = idx_writer_end_doc(w) != GRIT_OK;
            continue;
        }
        n = 0;
        char *p = line + 1, *end;
        for (unsigned long v = strtoul(p, &end, 10); end != p; v = strtoul(p, &end, 10)) {
            if (n == cap)
                tok = realloc(tok, (cap *= 2) * sizeof *tok);
            tok[n++] = (uint32_t)v;
            p = end;
        }
        rc = idx_writer_add(w, tok, n) != GRIT_OK;
    }
    free(line);
    free(tok);
    fclose(f);
    if (rc) {
        fprintf(stderr, "idx-tool: %s\n", grit_errmsg());
        idx_writer_abort(w);
        return 1;
    }
    if (idx_writer_finish(w)) {
        fprintf(stderr, "idx-tool: %s\n", grit_errmsg());
        return 1;
    }
    return 0;
}

static int do_dump(const char *prefix)
{
    idx_reader *r;
    if (idx_open(&r, prefix)) {
        fprintf(stderr, "idx-tool: %s\n", grit_errmsg());
        return 1;
    }
    uint32_t *buf = NULL;
    size_t cap = 0, seq = 0;
    for (size_t d = 0; d <= idx_num_docs(r); d++) {
        size_t end = d < idx_num_docs(r) ? idx_doc_start(r, d + 1) : idx_num_seqs(r);
        for (; seq < end; seq++) {
            size_t n = idx_seq_len(r, seq);
            if (n > cap)
                buf = realloc(buf, (cap = n) * sizeof *buf);
            idx_read(r, seq, 0, n, buf);
            putchar('S');
            for (size_t i = 0; i < n; i++)
                printf(" %u", buf[i]);
            putchar('\n');
        }
        if (d < idx_num_docs(r))
            printf("D\n");
    }
    free(buf);
    idx_close(r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "write") == 0)
        return do_write(argv[2], argv[3], atoi(argv[4]));
    if (argc == 3 && strcmp(argv[1], "dump") == 0)
        return do_dump(argv[2]);
    fprintf(stderr, "usage: grit-idx-tool write SPEC PREFIX DTYPE | dump PREFIX\n");
    return 2;
}
