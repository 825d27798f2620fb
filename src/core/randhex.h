/*
 * randhex.h - secrets and tokens: bytes from the kernel's random source (getrandom),
 * written as lowercase hex. One place for the job's heartbeat secret, the run lock's
 * token, grit serve's and grit rate's tokens.
 */
#ifndef GRIT_CORE_RANDHEX_H
#define GRIT_CORE_RANDHEX_H

#include <stddef.h>

#include "core/error.h"

/* out[0 .. 2 nbytes] = 2 nbytes hex digits of nbytes random bytes and a NUL (out holds
 * 2 nbytes + 1). GRIT_EIO naming what (e.g. "the job secret") when the kernel gives none. */
grit_err rand_hex(char *out, size_t nbytes, const char *what);

#endif
