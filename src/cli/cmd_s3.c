/*
 * cmd_s3.c - `grit s3 put | get | ls | rm | stat`: the S3 client (src/s3) from the
 * command line, for checking a bucket, moving checkpoint files by hand, and the
 * benchmark (bench/s3.sh). Credentials, region and endpoint come from the
 * environment as for s3:// checkpoints (src/s3/client.h); nothing secret is printed.
 */
#ifdef GRIT_HAVE_S3
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/progress.h"
#include "s3/client.h"

/* progress in MB for put / get */
static void on_progress(void *ctx, size_t done, size_t total)
{
    progress *p = ctx;
    char t[64];
    if (!p->out) {
        progress_init(p, stderr, (long)(total / 1000000), 16);
        p->out = stderr;
    }
    snprintf(t, sizeof t, "%.0f / %.0f MB", (double)done / 1e6, (double)total / 1e6);
    progress_update(p, (long)(done / 1000000), t);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit s3 <command> [options] ...\n"
            "\n"
            "  put FILE s3://BUCKET/KEY    upload (multipart above the part size)\n"
            "  get s3://BUCKET/KEY FILE    download (parallel ranged GETs)\n"
            "  ls s3://BUCKET[/PREFIX]     list keys under the prefix, with sizes\n"
            "  rm s3://BUCKET/KEY          delete\n"
            "  stat s3://BUCKET/KEY        print the size\n"
            "\n"
            "options:\n"
            "  --part-mib N        part / range size in MiB (default 8)\n"
            "  --concurrency N     requests in flight (default 16)\n"
            "  --retries N         retries per request on 5xx/429/network errors (default 5)\n"
            "  --unsigned-payload  send x-amz-content-sha256: UNSIGNED-PAYLOAD\n"
            "  --endpoint URL      instead of AWS_ENDPOINT_URL\n"
            "  --region NAME       instead of AWS_REGION / AWS_DEFAULT_REGION\n"
            "  --list-page N       keys per ListObjectsV2 page (default 1000)\n"
            "  --quiet, -q         no progress line (shown only on a terminal)\n"
            "  --stats             print bytes, seconds, MiB/s, requests and retries\n"
            "\n"
            "Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, or\n"
            "the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE).\n");
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fail(const char *what)
{
    fprintf(stderr, "grit s3: %s\n", what);
    return 1;
}

static void print_one(void *ctx, const char *name, size_t size)
{
    printf("%12zu  %s%s\n", size, (const char *)ctx, name);
}

int cmd_s3(int argc, char **argv)
{
    s3_opts o;
    s3_opts_defaults(&o);
    const char *pos[3] = {0};
    int npos = 0, stats = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--stats"))
            stats = 1;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q"))
            quiet = 1;
        else if (!strcmp(a, "--unsigned-payload"))
            o.unsigned_payload = true;
        else if (!strcmp(a, "--list-page")) {
            if (cli_int("s3", a, v, 1, 1000, &o.list_page))
                return 2;
            i++;
        } else if (!strcmp(a, "--part-mib")) {
            long mib;
            if (cli_long("s3", a, v, 1, 5120, &mib))
                return 2;
            o.part_size = (size_t)mib << 20;
            i++;
        } else if (!strcmp(a, "--concurrency") || !strcmp(a, "--retries")) {
            int c = a[2] == 'c';
            if (cli_int("s3", a, v, c ? 1 : 0, c ? 256 : 100, c ? &o.concurrency : &o.retries))
                return 2;
            i++;
        } else if (!strcmp(a, "--endpoint") || !strcmp(a, "--region")) {
            if (!v || strlen(v) >= 64 * (a[2] == 'e' ? 4 : 1)) {
                fprintf(stderr, "grit s3: %s: expected a value\n", a);
                return 2;
            }
            snprintf(a[2] == 'e' ? o.endpoint : o.region, a[2] == 'e' ? sizeof o.endpoint
                                                                        : sizeof o.region,
                     "%s", v);
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "grit s3: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (npos < 3)
            pos[npos++] = a;
        else {
            usage(stderr);
            return 2;
        }
    }
    const char *cmd = pos[0];
    int want = !cmd ? -1 : !strcmp(cmd, "put") || !strcmp(cmd, "get") ? 3
                         : !strcmp(cmd, "ls") || !strcmp(cmd, "rm") || !strcmp(cmd, "stat") ? 2
                                                                                             : -1;
    if (want < 0 || npos != want) {
        usage(stderr);
        return 2;
    }
    const char *url = !strcmp(cmd, "put") ? pos[2] : pos[1];
    char bucket[256], key[1024];
    if (s3_parse_url(url, bucket, sizeof bucket, key, sizeof key) != GRIT_OK)
        return fail(grit_errmsg());
    s3_client *c = NULL;
    if (s3_client_open(&o, &c) != GRIT_OK)
        return fail(grit_errmsg());
    int rc = 0;
    double t0 = now(), bytes = 0;
    progress bar = {0};
    if (!quiet && isatty(fileno(stderr))) /* logs stay clean; --stats gives the numbers */
        s3_client_set_progress(c, on_progress, &bar);
    char *buf = NULL;
    if (!strcmp(cmd, "put") || !strcmp(cmd, "get")) {
        if (!key[0]) {
            rc = fail("expected s3://BUCKET/KEY with a key");
            goto out;
        }
    }
    if (!strcmp(cmd, "put")) {
        FILE *f = fopen(pos[1], "rb");
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0)
            n = ftell(f);
        if (!f || n < 0 || fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)n + 1)) ||
            fread(buf, 1, (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "grit s3: %s: cannot read: %s\n", pos[1], strerror(errno));
            if (f)
                fclose(f);
            rc = 1;
            goto out;
        }
        fclose(f);
        t0 = now();
        const void *b[1] = {buf};
        size_t l[1] = {(size_t)n};
        if (s3_put(c, bucket, key, b, l, 1) != GRIT_OK)
            rc = fail(grit_errmsg());
        bytes = (double)n;
    } else if (!strcmp(cmd, "get")) {
        size_t n;
        if (s3_head(c, bucket, key, &n) != GRIT_OK) {
            rc = fail(grit_errmsg());
            goto out;
        }
        if (!(buf = malloc(n + 1))) {
            rc = fail("out of memory");
            goto out;
        }
        if (s3_get(c, bucket, key, 0, n, buf) != GRIT_OK) {
            rc = fail(grit_errmsg());
            goto out;
        }
        bytes = (double)n;
        double t1 = now();
        FILE *f = fopen(pos[2], "wb");
        if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
            fprintf(stderr, "grit s3: %s: cannot write: %s\n", pos[2], strerror(errno));
            rc = 1;
        }
        t0 += now() - t1; /* time the transfer, not the local write */
    } else if (!strcmp(cmd, "ls")) {
        char pre[1100];
        snprintf(pre, sizeof pre, "%s%s", key, key[0] ? "/" : "");
        char shown[1400];
        snprintf(shown, sizeof shown, "s3://%s/%s", bucket, pre);
        if (s3_list(c, bucket, pre, 0, print_one, shown) != GRIT_OK)
            rc = fail(grit_errmsg());
    } else if (!strcmp(cmd, "rm")) {
        if (s3_delete(c, bucket, key) != GRIT_OK)
            rc = fail(grit_errmsg());
    } else {
        size_t n;
        if (s3_head(c, bucket, key, &n) != GRIT_OK)
            rc = fail(grit_errmsg());
        else
            printf("%zu\n", n);
    }
    if (bar.out)
        progress_finish(&bar);
    if (stats && rc == 0) {
        double dt = now() - t0;
        s3_stats st = s3_client_stats(c);
        printf("bytes %.0f seconds %.3f MiB/s %.1f requests %ld retries %ld\n", bytes, dt,
               dt > 0 ? bytes / dt / 1048576.0 : 0, st.requests, st.retries);
    }
out:
    free(buf);
    s3_client_close(c);
    return rc;
}
#endif /* GRIT_HAVE_S3 */
