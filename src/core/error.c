/* error.c - error codes and the thread-local error context (see error.h). */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errbuf[1024];

const char *grit_strerror(grit_err err)
{
    switch (err) {
    case GRIT_OK: return "success";
    case GRIT_EINVAL: return "invalid argument";
    case GRIT_ENOMEM: return "out of memory";
    case GRIT_EIO: return "I/O error";
    case GRIT_ECONFIG: return "invalid configuration";
    case GRIT_EFORMAT: return "malformed file";
    case GRIT_ENUMERIC: return "numeric error";
    case GRIT_ENOTFOUND: return "not found";
    }
    return "unknown error";
}

grit_err grit_errf(grit_err err, const char *fmt, ...)
{
    char tmp[sizeof errbuf]; /* the arguments may include grit_errmsg() itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(errbuf, tmp, sizeof errbuf);
    return err;
}

const char *grit_errmsg(void) { return errbuf; }

void grit_errclear(void) { errbuf[0] = '\0'; }
