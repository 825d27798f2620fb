/*
 * test_filter.c - each Gopher / RefinedWeb filter drops the document made to
 * break it, for that reason, and a clean document passes all of them;
 * a disabled filter lets its document through; line corrections remove
 * counters, numeric, uppercase and navigation lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "prep/filter.h"

static filter_scratch fs;
static filter_cfg cfg;

/* A clean English paragraph of distinct sentences (> 50 words). */
static const char *const sentences[] = {
    "The package manager keeps track of every file that belongs to an installed program.",
    "When a new version arrives, the old files are replaced in a careful order.",
    "Administrators like this because upgrades rarely leave the system in a broken state.",
    "Dependencies are resolved before anything is written to the disk of the machine.",
    "Each repository publishes an index that lists the packages it offers to users.",
    "A signed release file lets the tool check that nobody has tampered with the index.",
    "Mirrors around the world carry copies so that downloads stay fast for everyone.",
    "Security updates come from a separate archive and should be applied quickly.",
    NULL};

static char buf[1 << 16];

static size_t clean_doc(void)
{
    buf[0] = 0;
    for (int i = 0; sentences[i]; i++) {
        strcat(buf, sentences[i]);
        strcat(buf, i % 2 ? "\n\n" : "\n");
    }
    return strlen(buf);
}

static int run(const char *text, const char *lang)
{
    snprintf(buf, sizeof buf, "%s", text);
    size_t len = strlen(buf);
    return filter_doc(&cfg, lang, buf, &len, &fs);
}

static int run_buf(const char *lang)
{
    size_t len = strlen(buf);
    return filter_doc(&cfg, lang, buf, &len, &fs);
}

int main(void)
{
    filter_cfg_default(&cfg);
    clean_doc();
    CHECK_INT(run_buf("en"), FILTER_KEEP);

    /* word count */
    CHECK_INT(run("Too short to be a document.", "en"), FILT_WORD_COUNT);
    /* the synthetic documents below are repetitive on purpose: each check
     * runs its filter alone (the repetition filters would fire first) */
    {
        /* >= 50 words, mostly one letter: mean length < 3 */
        char t[4096] = "the and ";
        for (int i = 0; i < 60; i++)
            strcat(t, "a b ");
        cfg.enabled = 1u << FILT_MEAN_WORD_LENGTH;
        CHECK_INT(run(t, "en"), FILT_MEAN_WORD_LENGTH);
    }
    /* symbol ratio: hashtags */
    clean_doc();
    for (int i = 0; i < 12; i++)
        strcat(buf, " #tag");
    cfg.enabled = 1u << FILT_SYMBOL_RATIO;
    CHECK_INT(run_buf("en"), FILT_SYMBOL_RATIO);
    /* ellipsis lines */
    clean_doc();
    for (int i = 0; i < 8; i++) {
        char l[64];
        snprintf(l, sizeof l, "\nand then something else happened %d...", i);
        strcat(buf, l);
    }
    cfg.enabled = 1u << FILT_ELLIPSIS_LINES;
    CHECK_INT(run_buf("en"), FILT_ELLIPSIS_LINES);
    filter_cfg_default(&cfg);
    /* bullet lines: every line a bullet */
    buf[0] = 0;
    for (int i = 0; sentences[i]; i++) {
        strcat(buf, "• ");
        strcat(buf, sentences[i]);
        strcat(buf, "\n");
    }
    CHECK_INT(run_buf("en"), FILT_BULLET_LINES);
    /* alphabetic words */
    clean_doc();
    for (int i = 0; i < 40; i++)
        strcat(buf, " 1234");
    cfg.enabled = 1u << FILT_ALPHA_WORDS;
    CHECK_INT(run_buf("en"), FILT_ALPHA_WORDS);
    filter_cfg_default(&cfg);
    /* stop words: English only */
    {
        char t[4096] = "";
        for (int i = 0; i < 60; i++)
            strcat(t, i % 2 ? "packages mirrors " : "upgrades repositories ");
        cfg.enabled &= ~(1u << FILT_TOP_NGRAM | 1u << FILT_DUP_NGRAM);
        CHECK_INT(run(t, "en"), FILT_STOP_WORDS);
        CHECK_INT(run(t, "de"), FILTER_KEEP);
        filter_cfg_default(&cfg);
    }
    /* duplicate lines */
    clean_doc();
    for (int i = 0; i < 6; i++)
        strcat(buf, "\nSubscribe to our newsletter for weekly updates on packages.");
    CHECK_INT(run_buf("en"), FILT_DUP_LINES);
    /* duplicate paragraph characters: one long paragraph repeated once */
    clean_doc();
    {
        char copy[8192];
        snprintf(copy, sizeof copy, "\n\n%s %s %s", sentences[0], sentences[2], sentences[4]);
        strcat(buf, copy);
        strcat(buf, copy);
        cfg.enabled &= ~(1u << FILT_DUP_LINES | 1u << FILT_DUP_LINE_CHARS |
                         1u << FILT_DUP_PARAGRAPHS);
        CHECK_INT(run_buf("en"), FILT_DUP_PARAGRAPH_CHARS);
        filter_cfg_default(&cfg);
    }
    /* top 2-gram: one bigram dominates */
    {
        char t[8192] = "";
        strcat(t, sentences[0]);
        for (int i = 0; i < 40; i++)
            strcat(t, " debian package");
        cfg.enabled = 1u << FILT_TOP_NGRAM;
        CHECK_INT(run(t, "en"), FILT_TOP_NGRAM);
        filter_cfg_default(&cfg);
    }
    /* repeated 5..10-grams */
    {
        char t[8192] = "";
        for (int i = 0; i < 3; i++)
            strcat(t, sentences[i % 2]);
        strcat(t, sentences[3]);
        cfg.enabled = 1u << FILT_DUP_NGRAM;
        CHECK_INT(run(t, "en"), FILT_DUP_NGRAM);
        cfg.enabled = 0; /* every filter switched off: kept */
        CHECK_INT(run(t, "en"), FILTER_KEEP);
        filter_cfg_default(&cfg);
    }
    /* line corrections: a few bad lines removed, the document kept */
    clean_doc();
    strcat(buf, "\n12 likes\n2024\nHome\n");
    {
        size_t len = strlen(buf);
        CHECK_INT(filter_doc(&cfg, "en", buf, &len, &fs), FILTER_KEEP);
        CHECK(strstr(buf, "likes") == NULL);
        CHECK(strstr(buf, "2024") == NULL);
        CHECK(strstr(buf, "Home") == NULL);
        CHECK(strstr(buf, sentences[7]) != NULL);
        CHECK_INT(len, strlen(buf));
        CHECK(strstr(buf, "\n\n\n") == NULL);
    }
    /* ... too much removed: dropped */
    clean_doc();
    strcat(buf, "\nREAD THE FULL TERMS AND CONDITIONS BEFORE YOU BUY ANYTHING HERE\n");
    CHECK_INT(run_buf("en"), FILT_LINE_CORRECTIONS);
    cfg.max_line_corrections = 0.5;
    CHECK_INT(run_buf("en"), FILTER_KEEP);
    filter_cfg_default(&cfg);

    CHECK_INT(filter_by_name("dup_ngram"), FILT_DUP_NGRAM);
    CHECK_INT(filter_by_name("nope"), -1);
    filter_scratch_free(&fs);
    return check_failures ? 1 : 0;
}
