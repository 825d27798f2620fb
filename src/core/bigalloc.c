/*
 * bigalloc.c - large buffers: 2 MiB aligned and advised MADV_HUGEPAGE from 2 MiB on,
 * pre-faulted by a memset at set-up (see bigalloc.h).
 */
#include "core/bigalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *big_alloc_untouched(size_t bytes)
{
    size_t n = bytes ? bytes : 1;
    size_t align = n >= BIGALLOC_HUGE ? BIGALLOC_HUGE : 64;
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (n >= BIGALLOC_HUGE) /* advice only: without THP the buffer keeps 4 KiB pages */
        (void)madvise(p, n & ~(BIGALLOC_HUGE - 1), MADV_HUGEPAGE);
#endif
    return p;
}

void *big_alloc(size_t bytes)
{
    void *p = big_alloc_untouched(bytes);
    if (p)
        memset(p, 0, bytes); /* every page faulted in now, not in the step loop */
    return p;
}

size_t big_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb)
        return (size_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
}
