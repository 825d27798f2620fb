/*
 * error.h - grit's error codes and the per-thread error context.
 *
 * Library code never exits: every fallible function returns a grit_err
 * (0 on success, a negative code on failure) and, where it knows more,
 * records a human-readable context with grit_errf() ("file:line:col: field:
 * expected ..."). Only src/cli/ prints the context and exits.
 *
 * The context is thread-local, set by the function that detected the error
 * and read by the caller that reports it; a later error overwrites it.
 */
#ifndef GRIT_CORE_ERROR_H
#define GRIT_CORE_ERROR_H

typedef enum grit_err {
    GRIT_OK = 0,
    GRIT_EINVAL = -1,   /* bad argument or bad value in input */
    GRIT_ENOMEM = -2,   /* allocation failed */
    GRIT_EIO = -3,      /* read/write/fsync/rename failed */
    GRIT_ECONFIG = -4,  /* configuration file is malformed or invalid */
    GRIT_EFORMAT = -5,  /* a data file does not follow its format */
    GRIT_ENUMERIC = -6, /* NaN/Inf or other numeric failure */
    GRIT_ENOTFOUND = -7 /* a named thing does not exist */
} grit_err;

/* Static description of a code; never NULL. */
const char *grit_strerror(grit_err err);

/* Records the context for the current thread's last error and returns err,
 * so callers can write `return grit_errf(GRIT_EINVAL, "...", ...)`. */
grit_err grit_errf(grit_err err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The current thread's last context ("" when none). Valid until the next
 * grit_errf() on this thread. */
const char *grit_errmsg(void);

void grit_errclear(void);

#endif
