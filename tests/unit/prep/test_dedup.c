/*
 * test_dedup.c - exact and MinHash-LSH near-duplicate detection
 * (src/prep/dedup.c) on real pages.
 *
 * Near duplicates: (1) the same page in two packages: the GNU GPL v2 as HTML
 * in installation-guide-amd64 (apf.html) and as text in base-files
 * (/usr/share/common-licenses/GPL-2), estimated Jaccard ~0.9; (2) a handbook
 * page and a copy with a changed footer paragraph (~0.98). The cheap preset
 * (14x8, LSH threshold (1/14)^(1/8) ~ 0.72) must put each pair in one
 * cluster. The refinedweb preset (20 bands x 450 rows, threshold
 * (1/20)^(1/450) ~ 0.993) is meant for near-verbatim copies: it must match
 * the same text with other white space and punctuation in every band. In
 * both, sibling pages of one chapter (same style and vocabulary) share no
 * band. Union-find joins chains into one component rooted at its first
 * member.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/fsutil.h"
#include "prep/dedup.h"
#include "prep/extract.h"

static char *page(const char *path, size_t *len)
{
    char *html = NULL;
    size_t n;
    prep_buf b = {0};
    if (fs_read_all(path, &html, &n) != GRIT_OK) {
        fprintf(stderr, "%s: missing (make deps)\n", path);
        exit(1);
    }
    CHECK_INT(extract_html(html, n, NULL, &b), GRIT_OK);
    free(html);
    *len = b.len;
    return b.p;
}

static int share_band(const uint64_t *a, const uint64_t *b, int bands)
{
    for (int i = 0; i < bands; i++)
        if (a[i] == b[i])
            return 1;
    return 0;
}

int main(void)
{
    /* exact: normalisation */
    CHECK(dedup_exact_hash("Hello, World!\n", 14) == dedup_exact_hash("hello   world", 13));
    CHECK(dedup_exact_hash("hello world", 11) != dedup_exact_hash("hello there", 11));
    CHECK(dedup_exact_hash("Grüße aus Köln", 16) != dedup_exact_hash("Gre aus Kln", 11));

    enum { N = 5 };
    size_t len[N];
    char *doc[N];
    doc[0] = page("/usr/share/doc/installation-guide-amd64/en/apf.html", &len[0]);
    if (fs_read_all("/usr/share/common-licenses/GPL-2", &doc[1], &len[1]) != GRIT_OK)
        return 1;
    doc[2] = page("/usr/share/doc/debian-handbook/html/en-US/sect.apt-get.html", &len[2]);
    /* 3: doc 2 with its last paragraph replaced by a new footer */
    {
        char *cut = strrchr(doc[2], '\n');
        size_t keep = (size_t)(cut - doc[2]);
        const char *foot = "\nThis page was mirrored by Example Corp. All rights reserved, "
                           "contact webmaster@example.com for takedown requests.";
        doc[3] = malloc(keep + strlen(foot) + 1);
        memcpy(doc[3], doc[2], keep);
        strcpy(doc[3] + keep, foot);
        len[3] = strlen(doc[3]);
    }
    doc[4] = page("/usr/share/doc/debian-handbook/html/en-US/sect.apt-cache.html", &len[4]);
    CHECK(strcmp(doc[0], doc[1]) != 0); /* not exact duplicates: page furniture differs */

    static const int presets[2][2] = {{20, 450}, {14, 8}};
    for (int p = 0; p < 2; p++) {
        int bands = presets[p][0];
        minhash m;
        CHECK_INT(minhash_init(&m, bands, presets[p][1], 5), GRIT_OK);
        uint64_t *keys = malloc((size_t)N * (size_t)bands * sizeof *keys);
        for (int d = 0; d < N; d++)
            CHECK_INT(minhash_keys(&m, doc[d], len[d], keys + d * bands), GRIT_OK);
        {
            size_t k = (size_t)bands * (size_t)presets[p][1];
            uint32_t *mins[N];
            for (int d = 0; d < N; d++) {
                mins[d] = malloc(k * 4);
                minhash_keys(&m, doc[d], len[d], keys + d * bands);
                memcpy(mins[d], m.mins, k * 4);
            }
            int pairs[4][2] = {{0, 1}, {2, 3}, {2, 4}, {0, 2}};
            for (int q = 0; q < 4; q++) {
                size_t eq = 0;
                for (size_t i = 0; i < k; i++)
                    eq += mins[pairs[q][0]][i] == mins[pairs[q][1]][i];
                printf("%dx%d: J(%d,%d) ~ %.3f\n", bands, presets[p][1], pairs[q][0], pairs[q][1], (double)eq / k);
            }
            for (int d = 0; d < N; d++) free(mins[d]);
        }
        if (p == 1) {
            CHECK(share_band(keys + 0 * bands, keys + 1 * bands, bands)); /* two packages */
            CHECK(share_band(keys + 2 * bands, keys + 3 * bands, bands)); /* changed footer */
        }
        CHECK(!share_band(keys + 2 * bands, keys + 4 * bands, bands)); /* sibling page */
        CHECK(!share_band(keys + 0 * bands, keys + 2 * bands, bands));
        /* deterministic */
        uint64_t again[20];
        CHECK_INT(minhash_keys(&m, doc[2], len[2], again), GRIT_OK);
        CHECK(memcmp(again, keys + 2 * bands, (size_t)bands * 8) == 0);
        /* the same text with other white space and punctuation: every band equal */
        {
            char *v = strdup(doc[2]);
            for (char *c = v; *c; c++)
                *c = *c == '\n' ? ' ' : *c == ',' ? ';' : *c;
            uint64_t k2[20];
            CHECK_INT(minhash_keys(&m, v, len[2], k2), GRIT_OK);
            CHECK(memcmp(k2, keys + 2 * bands, (size_t)bands * 8) == 0);
            free(v);
        }
        if (p == 1) {
            /* LSH + union-find: {0,1} {2,3} {4} */
            uint8_t alive[N] = {1, 1, 1, 1, 1};
            uf u;
            CHECK_INT(uf_init(&u, N), GRIT_OK);
            CHECK_INT(lsh_cluster(keys, alive, N, bands, &u), GRIT_OK);
            CHECK_INT(uf_find(&u, 1), 0);
            CHECK_INT(uf_find(&u, 3), 2);
            CHECK_INT(uf_find(&u, 4), 4);
            CHECK_INT(uf_find(&u, 0), 0);
            uf_free(&u);
            /* a dead document is not clustered */
            alive[0] = 0;
            CHECK_INT(uf_init(&u, N), GRIT_OK);
            CHECK_INT(lsh_cluster(keys, alive, N, bands, &u), GRIT_OK);
            CHECK_INT(uf_find(&u, 1), 1);
            uf_free(&u);
        }
        free(keys);
        minhash_free(&m);
    }
    /* chains: 0-1, 1-2 -> one component rooted at 0 */
    uf u;
    CHECK_INT(uf_init(&u, 4), GRIT_OK);
    uf_union(&u, 2, 1);
    uf_union(&u, 1, 0);
    CHECK_INT(uf_find(&u, 2), 0);
    CHECK_INT(uf_find(&u, 3), 3);
    uf_free(&u);
    for (int d = 0; d < N; d++)
        free(doc[d]);
    return check_failures ? 1 : 0;
}
