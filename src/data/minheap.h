/*
 * minheap.h - a binary min-heap of 64-bit keys in a caller-owned array, for the BPE
 * merge loops (bpe_encode.c, hftok_encode.c): a key packs a merge's rank and position,
 * so the smallest is the next merge to apply. Header-only (static inline) because it
 * sits in the tokenizers' innermost loop. The caller sizes h for every push.
 */
#ifndef GRIT_DATA_MINHEAP_H
#define GRIT_DATA_MINHEAP_H

#include <stddef.h>
#include <stdint.h>

static inline void minheap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

/* Removes and returns the smallest key (*n > 0). */
static inline uint64_t minheap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m)
            break;
        size_t r = l + 1, k = (r < m && h[r] < h[l]) ? r : l;
        if (h[k] >= v)
            break;
        h[i] = h[k];
        i = k;
    }
    h[i] = v;
    return top;
}

#endif
