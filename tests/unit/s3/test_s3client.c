/*
 * test_client.c - the S3 client's configuration, without a network: credentials from
 * the environment and from a shared credentials file (profiles), clear errors when they
 * are missing, endpoint and s3:// URL parsing. (Requests are tested against a real
 * server by tests/integration/s3_*.sh.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "s3/client.h"

static void clear_env(void)
{
    const char *v[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                       "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION",
                       "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", NULL};
    for (int i = 0; v[i]; i++)
        unsetenv(v[i]);
}

int main(void)
{
    s3_opts o;
    s3_client *c = NULL;
    char dir[] = "/tmp/grit-s3-unit.XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    clear_env();
    setenv("HOME", dir, 1);
    s3_opts_defaults(&o);
    CHECK_INT(o.part_size, 8u << 20);
    CHECK_INT(o.concurrency, 16);

    /* nothing anywhere: a clear error naming both places */
    CHECK_INT(s3_client_open(&o, &c), GRIT_EINVAL);
    CHECK_ERRMSG("AWS_ACCESS_KEY_ID");
    CHECK_ERRMSG("/.aws/credentials");
    CHECK(c == NULL);

    /* the environment */
    setenv("AWS_ACCESS_KEY_ID", "test:tester", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-env", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    CHECK_INT(s3_client_open(&o, &c), GRIT_OK);
    s3_client_close(c);
    c = NULL;
    clear_env();

    /* a shared credentials file with two profiles */
    snprintf(path, sizeof path, "%s/creds", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d3f\n\n"
               "[ci]\n  aws_access_key_id=AKIDCI \n aws_secret_access_key = c1\n"
               "aws_session_token = tok\n[empty]\n# nothing\n");
    fclose(f);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    setenv("AWS_ENDPOINT_URL", "https://s3.example.net", 1);
    CHECK_INT(s3_client_open(&o, &c), GRIT_OK);
    s3_client_close(c);
    c = NULL;
    setenv("AWS_PROFILE", "ci", 1);
    CHECK_INT(s3_client_open(&o, &c), GRIT_OK);
    s3_client_close(c);
    c = NULL;
    setenv("AWS_PROFILE", "empty", 1);
    CHECK_INT(s3_client_open(&o, &c), GRIT_EINVAL);
    CHECK_ERRMSG("profile lacks a key");
    CHECK(strstr(grit_errmsg(), "d3f") == NULL); /* no secret in messages */
    setenv("AWS_PROFILE", "nope", 1);
    CHECK_INT(s3_client_open(&o, &c), GRIT_EINVAL);
    CHECK_ERRMSG("[nope]");

    /* endpoints */
    clear_env();
    setenv("AWS_ACCESS_KEY_ID", "a", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "b", 1);
    snprintf(o.endpoint, sizeof o.endpoint, "ftp://x");
    CHECK_INT(s3_client_open(&o, &c), GRIT_EINVAL);
    CHECK_ERRMSG("expected http://HOST[:PORT]");
    snprintf(o.endpoint, sizeof o.endpoint, "http://host:80/path");
    CHECK_INT(s3_client_open(&o, &c), GRIT_EINVAL);
    CHECK_ERRMSG("no path");
    snprintf(o.endpoint, sizeof o.endpoint, "http://host:8080/");
    CHECK_INT(s3_client_open(&o, &c), GRIT_OK);
    s3_client_close(c);
    c = NULL;
    s3_client_close(NULL);

    /* s3:// URLs */
    char b[64], p[128];
    CHECK_INT(s3_parse_url("s3://bkt/a/b/", b, sizeof b, p, sizeof p), GRIT_OK);
    CHECK(!strcmp(b, "bkt") && !strcmp(p, "a/b"));
    CHECK_INT(s3_parse_url("s3://bkt", b, sizeof b, p, sizeof p), GRIT_OK);
    CHECK(!strcmp(b, "bkt") && !strcmp(p, ""));
    CHECK_INT(s3_parse_url("s3:///x", b, sizeof b, p, sizeof p), GRIT_EINVAL);
    CHECK_INT(s3_parse_url("/local/dir", b, sizeof b, p, sizeof p), GRIT_EINVAL);
    CHECK_ERRMSG("expected s3://BUCKET[/PREFIX]");

    unlink(path);
    rmdir(dir);
    CHECK_DONE();
}
