/*
 * bigalloc.h - allocation of the large, long-lived buffers of a run (weights, gradients,
 * optimiser state, activations, checkpoint snapshots).
 *
 * Two things a training step must not pay for: page faults (a first touch in the step
 * loop costs a fault per 4 KiB page, and with several threads the faults serialise on the
 * process's memory map) and TLB misses over hundreds of MiB. So a buffer of 2 MiB or more
 * is aligned to 2 MiB and advised MADV_HUGEPAGE (transparent huge pages where the kernel
 * has them in "madvise" or "always" mode; otherwise a no-op), and big_alloc touches every
 * page once, at set-up (memset to zero), unless the caller touches it itself
 * (big_alloc_untouched: e.g. a parallel first-touch copy).
 */
#ifndef GRIT_CORE_BIGALLOC_H
#define GRIT_CORE_BIGALLOC_H

#include <stddef.h>

#define BIGALLOC_HUGE ((size_t)2 << 20) /* from this size on: 2 MiB aligned, huge pages */

/* bytes of zeroed, pre-faulted memory (at least 64-byte aligned); NULL when out of
 * memory. Free with free(). */
void *big_alloc(size_t bytes);

/* the same, neither zeroed nor touched */
void *big_alloc_untouched(size_t bytes);

/* Memory a new allocation can get now: MemAvailable from /proc/meminfo (the machine may
 * be shared), else the free physical pages; 0 if neither is known. */
size_t big_mem_available(void);

#endif
