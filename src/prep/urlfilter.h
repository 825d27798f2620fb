/*
 * urlfilter.h - grit prep's URL block-list stage, RefinedWeb's first
 * filter: documents are rejected by their URL alone, before any parsing.
 *
 * The list file (given by the user; one rule a line, '#' starts a comment,
 * blank lines skipped, everything lower-cased):
 *   example.com          a domain: the host and every subdomain of it
 *                        (a bare line is a domain, so UT1-style domain
 *                        lists work as they are)
 *   domain example.com   the same, spelled out
 *   url https://x/y      one exact URL
 *   allow wikipedia.org  a domain never rejected (RefinedWeb's exceptions)
 *   strict WORD          rejected when WORD occurs anywhere in the URL
 *   hard WORD            rejected when WORD is one of the URL's words
 *   soft WORD            counted when WORD is one of the URL's words ...
 *   soft_threshold N     ... rejected when N or more soft words occur
 *                        (distinct; default 3)
 * The URL's words: the lower-cased URL split at every byte that is not an
 * ASCII letter or digit (bytes >= 0x80 stay inside words).
 *
 * Checks in order (the first that matches names the reason): allow, url,
 * domain, strict, hard, soft. Deterministic; read-only after urlf_load, so
 * one filter serves every thread.
 *
 * Ownership: urlf_load allocates, urlf_free frees (NULL is a no-op).
 */
#ifndef GRIT_PREP_URLFILTER_H
#define GRIT_PREP_URLFILTER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

typedef struct urlf urlf;

enum { URLF_KEEP = 0, URLF_URL, URLF_DOMAIN, URLF_STRICT, URLF_HARD, URLF_SOFT };

/* Reads the list; errors name path:line and what was expected. *hash gets
 * an XXH3-64 of the rules (for the plan fingerprint). */
grit_err urlf_load(urlf **out, const char *path, uint64_t *hash);
void urlf_free(urlf *f);
/* URLF_KEEP or the reason (URLF_*) the URL is rejected. */
int urlf_check(const urlf *f, const char *url, size_t len);
/* The drop reasons: "url_listed", "url_domain", "url_strict_word",
 * "url_hard_word", "url_soft_words". */
const char *urlf_reason_name(int reason);
/* Rules loaded, for messages. */
size_t urlf_rules(const urlf *f);

#endif
