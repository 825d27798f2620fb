/* randhex.c - see randhex.h. */
#define _GNU_SOURCE
#include "core/randhex.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

grit_err rand_hex(char *out, size_t nbytes, const char *what)
{
    static const char hx[] = "0123456789abcdef";
    unsigned char r[64];
    for (size_t done = 0; done < nbytes;) {
        size_t n = nbytes - done < sizeof r ? nbytes - done : sizeof r;
        ssize_t got = getrandom(r, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got != (ssize_t)n) {
            explicit_bzero(r, sizeof r);
            return grit_errf(GRIT_EIO, "no random bytes for %s: %s", what,
                             got < 0 ? strerror(errno) : "short read");
        }
        for (size_t k = 0; k < n; k++) {
            out[2 * (done + k)] = hx[r[k] >> 4];
            out[2 * (done + k) + 1] = hx[r[k] & 15];
        }
        done += n;
    }
    explicit_bzero(r, sizeof r); /* the bytes of a secret do not stay on the stack */
    out[2 * nbytes] = '\0';
    return GRIT_OK;
}
