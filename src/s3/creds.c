/*
 * creds.c - where the S3 client's settings come from: credentials (environment,
 * then the shared credentials file), the endpoint URL, s3:// locations.
 * Secrets are copied into an s3_creds and wiped from it on close; never printed.
 */
#define _GNU_SOURCE
#include "s3/creds.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/client.h"

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    size_t i = 0;
    while (isspace((unsigned char)s[i]))
        i++;
    memmove(s, s + i, n - i + 1);
}

/* Reads aws_access_key_id / aws_secret_access_key / aws_session_token of a profile
 * from an INI file. GRIT_ENOTFOUND when the file or profile is missing. */
static grit_err read_cred_file(s3_creds *c, const char *path, const char *profile)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return GRIT_ENOTFOUND;
    char line[4096], want[300];
    snprintf(want, sizeof want, "[%s]", profile);
    int in = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        trim(line);
        if (line[0] == '[') {
            in = !strcmp(line, want);
            found |= in;
            continue;
        }
        char *eq = strchr(line, '=');
        if (!in || !eq || line[0] == '#' || line[0] == ';')
            continue;
        *eq = '\0';
        char *k = line, *v = eq + 1;
        trim(k);
        trim(v);
        if (!strcmp(k, "aws_access_key_id"))
            snprintf(c->access, sizeof c->access, "%s", v);
        else if (!strcmp(k, "aws_secret_access_key"))
            snprintf(c->secret, sizeof c->secret, "%s", v);
        else if (!strcmp(k, "aws_session_token"))
            snprintf(c->token, sizeof c->token, "%s", v);
    }
    fclose(f);
    memset(line, 0, sizeof line);
    return found ? GRIT_OK : GRIT_ENOTFOUND;
}

grit_err s3_creds_load(s3_creds *c)
{
    const char *id = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
    if (id && *id && sk && *sk) {
        const char *tok = getenv("AWS_SESSION_TOKEN");
        if (strlen(id) >= sizeof c->access || strlen(sk) >= sizeof c->secret ||
            (tok && strlen(tok) >= sizeof c->token))
            return grit_errf(GRIT_EINVAL, "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or "
                                          "AWS_SESSION_TOKEN: longer than this client takes");
        snprintf(c->access, sizeof c->access, "%s", id);
        snprintf(c->secret, sizeof c->secret, "%s", sk);
        snprintf(c->token, sizeof c->token, "%s", tok ? tok : "");
        return GRIT_OK;
    }
    char path[1024];
    const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
    const char *profile = getenv("AWS_PROFILE");
    if (!profile || !*profile)
        profile = "default";
    if (file && *file)
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/.aws/credentials", home ? home : "");
    grit_err rc = read_cred_file(c, path, profile);
    if (rc == GRIT_OK && c->access[0] && c->secret[0])
        return GRIT_OK;
    return grit_errf(GRIT_EINVAL,
                     "S3: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                     "put aws_access_key_id and aws_secret_access_key under [%s] in %s%s",
                     profile, path,
                     rc == GRIT_ENOTFOUND ? " (file or profile not found)"
                                          : " (profile lacks a key)");
}

grit_err s3_parse_endpoint(const char *ep, char *host, size_t hcap, char *base, size_t bcap)
{
    const char *p = strstr(ep, "://");
    if (!p || (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)))
        return grit_errf(GRIT_EINVAL, "S3 endpoint '%s': expected http://HOST[:PORT] or "
                                      "https://HOST[:PORT]", ep);
    p += 3;
    size_t hl = strcspn(p, "/?#");
    if (hl == 0 || hl >= hcap || p[hl + (p[hl] == '/')] != '\0')
        return grit_errf(GRIT_EINVAL, "S3 endpoint '%s': expected scheme://HOST[:PORT] with "
                                      "no path", ep);
    memcpy(host, p, hl);
    host[hl] = '\0';
    snprintf(base, bcap, "%.*s", (int)(p - ep + (long)hl), ep);
    return GRIT_OK;
}

void s3_creds_wipe(s3_creds *c)
{
    volatile char *p = (volatile char *)c;
    for (size_t i = 0; i < sizeof *c; i++)
        p[i] = 0;
}

grit_err s3_parse_url(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap)
{
    if (strncmp(url, "s3://", 5) != 0)
        return grit_errf(GRIT_EINVAL, "'%s': expected s3://BUCKET[/PREFIX]", url);
    const char *b = url + 5;
    size_t bl = strcspn(b, "/");
    if (bl == 0 || bl >= bcap)
        return grit_errf(GRIT_EINVAL, "'%s': expected s3://BUCKET[/PREFIX] with a bucket name "
                                      "of 1 to %zu characters", url, bcap - 1);
    memcpy(bucket, b, bl);
    bucket[bl] = '\0';
    const char *p = b + bl;
    while (*p == '/')
        p++;
    size_t pl = strlen(p);
    while (pl && p[pl - 1] == '/')
        pl--;
    if (pl >= pcap)
        return grit_errf(GRIT_EINVAL, "'%s': prefix longer than %zu bytes", url, pcap - 1);
    memcpy(prefix, p, pl);
    prefix[pl] = '\0';
    return GRIT_OK;
}
